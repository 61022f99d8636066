"""The 2026-07-28 front: one JSON-RPC request per POST, as the endpoint (front/endpoint.py) parsed it.

Checks the request at the boundary (front/checks.py), answers `ping`, hands `server/discover`, list and
completion requests to plain.py, calls to the call service (inline requests become `input_required` rounds;
outcome.py turns what it returns into the client's answer), `subscriptions/listen` to listen.py, the Tasks
extension's methods to proxy/tasks. A retry for a call another replica holds goes to it (front/peers.py).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from aiohttp import web

from proxy.calls.outcomes import CallLink, CallRequest, Forward, InvalidRequestState, OwnerGone
from proxy.calls.service import CallService
from proxy.calls.wording import unavailable_answer
from proxy.config import FrontConfig, UpstreamConfig
from proxy.front.address import AddressSource
from proxy.front.checks import InputLimits, Refusal, check_modern
from proxy.front.modern.aggregate import AggregateFront, Own, Routed
from proxy.front.modern.limits import RateGate
from proxy.front.modern.listen import ListenFront
from proxy.front.modern.outcome import answer
from proxy.front.modern.peer_route import check_peer_request, key_not_held, owner_refused
from proxy.front.modern.plain import PlainRequests
from proxy.front.modern.relay import NativeRelay
from proxy.front.oauth import OAuthFront
from proxy.front.peers import FORWARD_PREFIX, PeerLost, PeerRefused, Peers, PeerUnreachable
from proxy.front.principal import Resolver
from proxy.front.reply import Notes, Replier
from proxy.observe.line import RequestLine
from proxy.routes.policy import Grant
from proxy.routes.table import Route as AggregatedRoute
from proxy.routes.table import RouteTable
from proxy.tasks.front import TaskFront
from proxy.translate.request import ModernRequest
from proxy.upstream.base import UpstreamAuthChallenge
from proxy.upstream.modern import NotModern
from proxy.upstream.pool import PoolKey, PoolKeys, SessionPool
from proxy.wire import jsonrpc, mcp
from proxy.wire.jsonrpc import ErrorObject


class RuntimeStateView(Protocol):
    @property
    def draining(self) -> bool: ...
    @property
    def stopped(self) -> bool: ...

    forwarding: int


INVALID_STATE_MESSAGE = "Invalid requestState"  # the one message for every handle rejection


@dataclass(frozen=True, slots=True)
class Route:
    upstream: UpstreamConfig
    pool: PoolKey | None = None


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
        tasks: TaskFront | None = None,  # the Tasks extension (proxy/tasks); None: no tasks
        listen: ListenFront | None = None,  # subscriptions/listen (listen.py); None: not served
        oauth: OAuthFront | None = None,  # OAuth (front/oauth.py); None: upstream 401s are plain errors
        relay: NativeRelay | None = None,  # to 2026-07-28 upstreams (relay.py); None: all taken as legacy
        aggregate: AggregateFront | None = None,  # aggregated routes (aggregate.py); None: none configured
    ) -> None:
        self.relay = relay
        self._oauth = oauth
        self._aggregate = aggregate
        self.routes = aggregate.table if aggregate is not None else RouteTable({})  # the endpoint's to tell
        self._state = state
        self._tasks = tasks
        self.listener = listen  # the endpoint's, and a legacy client's GET stream's (inner.py)
        self._front = front
        self._addresses = AddressSource.from_config(front)  # each call's client address (its share)
        self._peers = peers
        self._principal = principal
        self.rate = RateGate(front)  # the endpoint's legacy requests take from it too
        self._upstreams = upstreams
        self._keys = PoolKeys()
        self._pools = pools
        self._calls = calls
        self.limits = InputLimits(front.max_input_responses, front.max_input_response_bytes)
        self.plain = PlainRequests(pools=pools, calls=calls, tasks=tasks, oauth=oauth)

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
        aggregated `route` (`upstream` is then its name) the request goes on to the upstream that owns
        its name, or the route answers it itself (aggregate.py); `grant`: the validated token's scopes and
        claims (validate mode)."""
        req = check_modern(msg, request.headers, limits=self.limits)
        if principal is None:
            principal = self._principal(request.headers)
        own: Own | None = None
        who = principal

        def key_for(name: str) -> PoolKey:
            return self.pool_key(name, req, request, who, upstream_headers)

        forwarded = request.path.startswith(FORWARD_PREFIX)  # the endpoint checked its signature
        if forwarded and req.request_state is None and msg.method not in mcp.TASK_METHODS:
            raise Refusal(400, ErrorObject(jsonrpc.INVALID_REQUEST, "The peer route only takes retries"))
        self.rate.check(principal)  # a forwarded retry counts here too: this replica does its work
        # An aggregated route: after the rate check, as resolving a bare name may list the upstreams.
        if route is not None:
            upstream, req, own = await self.routed(
                route, req, principal=principal, grant=grant, key_for=key_for, line=line
            )
        key = self.pool_key(upstream, req, request, principal, upstream_headers)
        if self._state.draining and msg.method in mcp.MRTR_METHODS and req.request_state is None:
            raise Refusal(
                503,
                ErrorObject(
                    jsonrpc.SHUTTING_DOWN,
                    "This proxy replica is shutting down; send the request again (another "
                    "replica will take it)",
                ),
            )
        # Never a route's own answers (lists, discover), nor its listen: that one listens to every upstream.
        relayable = own is None and (route is None or msg.method != mcp.LISTEN)
        if relayable and await self.relays(upstream, req, key):
            relayed = await self._relayed(
                request, upstream, req=req, key=key, principal=principal, line=line, route=route
            )
            if relayed is not None:
                return relayed  # else the upstream turned out legacy: on the legacy way below
        if msg.method == mcp.LISTEN and self.listener is not None:  # a long-lived stream of its own
            return await self.listener.serve(
                request,
                upstream=upstream,
                req=req,
                key=key,
                principal=principal,
                line=line,
                route=route,
                key_for=key_for,
            )
        replier = Replier(request)

        async def dispatch(
            local_only: bool, owner_gone: OwnerGone | None = None
        ) -> jsonrpc.Response | Forward:
            work = (
                own()
                if own is not None
                else self.dispatch(
                    upstream=upstream,
                    req=req,
                    key=key,
                    principal=principal,
                    replier=replier,
                    line=line,
                    local_only=local_only,
                    owner_gone=owner_gone,
                    link=link,
                    address=self._addresses.of(request),
                )
            )
            try:
                return await replier.kept_alive(work, self._front.keepalive_s)
            except UpstreamAuthChallenge as exc:  # the upstream refused the client's credentials
                return self._challenged(request, upstream, msg.id, exc, replier=replier, line=line)

        answer = await dispatch(local_only=forwarded)
        if isinstance(answer, Forward):
            return await self._forward_to_owner(
                answer, request, body, msg.id, line=line, replier=replier, dispatch=dispatch
            )
        return await replier.finish(answer, 404 if _is_unknown_method(answer) else 200)

    async def routed(
        self,
        route: AggregatedRoute,
        req: ModernRequest,
        *,
        principal: str,
        grant: Grant | None,
        key_for: Callable[[str], PoolKey],
        line: RequestLine,
    ) -> tuple[str, ModernRequest, Own | None]:
        """Where a request on an aggregated route goes: the upstream that owns its name (the request
        renamed to that upstream's name), or the route's own answer (`Own`: lists, discover)."""
        assert self._aggregate is not None  # a route is known only when aggregates are configured
        routed = await self._aggregate.route(
            route, req, principal=principal, grant=grant, key_for=key_for, line=line
        )
        if isinstance(routed, Routed):
            return routed.upstream, routed.req, None
        return route.members[0].upstream, req, routed

    async def relays(self, upstream: str, req: ModernRequest, key: PoolKey) -> bool:
        """Whether `req` takes the native relay (relay.py): it may, and the upstream speaks 2026-07-28."""
        relay = self.relay
        return (
            relay is not None
            and relay.takes(upstream, req.request)
            and await relay.modern(upstream, key.forwarded, req.request_state)
        )

    async def _relayed(
        self,
        request: web.Request,
        upstream: str,
        *,
        req: ModernRequest,
        key: PoolKey,
        principal: str,
        line: RequestLine,
        route: AggregatedRoute | None,
    ) -> web.StreamResponse | None:
        """The native relay's answer (relay.py; `route`: what is bound depends on it); None when the upstream
        answered as a legacy server and the era probed again says legacy (nothing was processed: the
        request goes the legacy way)."""
        assert self.relay is not None
        replier = Replier(request)
        work = self.relay.relay(
            request,
            upstream,
            req,
            principal=principal,
            forwarded=key.forwarded,
            replier=replier,
            line=line,
            route=None if route is None else route.name,
        )
        try:
            answer = await replier.kept_alive(work, self._front.keepalive_s)
            assert not isinstance(answer, Forward)  # nothing of a relayed call is held by a replica
        except NotModern as exc:
            self.relay.eras.suspect(upstream, f"a modern request was answered the legacy way: {exc}")
            if not replier.started and not await self.relay.modern(upstream, key.forwarded):
                line.pop("upstream_era", None)
                return None
            answer = unavailable_answer(req.request.id, upstream, exc, line)
        except UpstreamAuthChallenge as exc:
            answer = self._challenged(request, upstream, req.request.id, exc, replier=replier, line=line)
        return await replier.finish(answer, 404 if _is_unknown_method(answer) else 200)

    async def _forward_to_owner(
        self,
        answer: Forward,
        request: web.Request,
        body: bytes,
        rid: jsonrpc.RequestId,
        *,
        line: RequestLine,
        replier: Replier,
        dispatch: Callable[..., Awaitable[jsonrpc.Response | Forward]],
    ) -> web.StreamResponse:
        """Send the retry to the call's owner; if it is gone, handle it here, saying what is known."""
        line["owner"] = answer.owner
        self._state.forwarding += 1  # the drain waits for it
        try:
            try:
                response = await self._peers.forward(answer.owner, request, body, rid)
            except PeerUnreachable as exc:  # nothing reached the owner: handle it here (takeover or lost)
                line["owner_unreachable"] = str(exc)
                local = await dispatch(local_only=True, owner_gone="unreachable")
            except PeerRefused as exc:  # another key ring at the owner's address: lost, never re-run
                return await replier.finish(owner_refused(rid, answer.owner, exc.reason, line))
            except PeerLost as exc:  # it took the retry and went away: take over if the upstream can resume
                line["owner_lost"] = str(exc)
                if exc.stream is not None:  # the owner's event stream was cut: the answer goes on there
                    replier.adopt(exc.stream)
                local = await dispatch(local_only=True, owner_gone="unknown")
            else:
                line["outcome"] = f"forwarded:{response.status}"
                return response
            assert not isinstance(local, Forward)
            return await replier.finish(local, 404 if _is_unknown_method(local) else 200)
        finally:
            self._state.forwarding -= 1

    async def dispatch(
        self,
        *,
        upstream: str,
        req: ModernRequest,
        key: PoolKey,
        principal: str,
        replier: Notes,
        line: RequestLine,
        local_only: bool = False,
        owner_gone: OwnerGone | None = None,
        link: CallLink | None = None,
        address: str = "",
    ) -> jsonrpc.Response | Forward:
        msg = req.request
        if msg.method == "ping":
            line["outcome"] = "complete"
            return jsonrpc.Result(msg.id, {"resultType": mcp.RESULT_COMPLETE})
        if msg.method == "server/discover":
            return await self.plain.discover(upstream, msg, key, line)
        if msg.method in mcp.FORWARDED_METHODS:
            return await self.plain.forward(upstream, req, key, line)
        if msg.method in mcp.TASK_METHODS and self._tasks is not None:
            return await self._tasks.handle(upstream, req, principal, line, local_only=local_only)
        if msg.method not in mcp.MRTR_METHODS:
            line["outcome"] = "unknown_method"
            return jsonrpc.error(msg.id, jsonrpc.METHOD_NOT_FOUND, f"Method not found: {msg.method}")
        call = CallRequest(
            upstream,
            msg.method,
            req.upstream_params,
            key,
            principal,
            link or CallLink(),
            log_level=req.log_level,
            address=address,
        )
        try:
            if self._tasks is not None and self._tasks.applies(req):  # may become a task (proxy/tasks)
                outcome = await self._tasks.call(
                    call, req, replier.notify, local_only=local_only, owner_gone=owner_gone
                )
            elif req.request_state is None:
                outcome = await self._calls.start(call, replier.notify)
            else:
                outcome = await self._calls.resume(
                    call,
                    req.request_state,
                    req.input_responses,
                    replier.notify,
                    local_only=local_only,
                    owner_gone=owner_gone,
                )
        except InvalidRequestState as exc:
            line.update(outcome="handle_rejected", reason=exc.reason)
            if exc.reason == "unknown_key":
                raise key_not_held(req.request_state, self._peers.ring(), line) from None
            return jsonrpc.error(msg.id, jsonrpc.INVALID_PARAMS, INVALID_STATE_MESSAGE)
        return answer(msg, outcome, line, started=replier.started)

    def pool_key(
        self,
        upstream: str,
        req: ModernRequest,
        request: web.Request,
        principal: str,
        forwarded: tuple[tuple[str, str], ...] | None,
    ) -> PoolKey:
        """Sessions per capability set, forwarded headers (validate mode: the gate's) and principal."""
        if forwarded is None:
            headers, names = request.headers, self._upstreams[upstream].forward_headers
            forwarded = tuple([(n, headers[n]) for n in names if n in headers])
        return self._keys.of(req.capabilities, forwarded, principal)  # one object per value: upstream/pool.py

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
        """Raise the upstream's 401/403 as the client's answer (AuthRefused), unless a 200 SSE stream has
        already begun: then it can only be a JSON-RPC error in it."""
        line["outcome"] = f"upstream_unauthorized:{exc.status}"
        if replier.started or self._oauth is None:
            return jsonrpc.error(rid, jsonrpc.UPSTREAM_FAILED, f"Upstream {upstream!r}: {exc}")
        raise self._oauth.relayed(request, upstream, exc)


def _is_unknown_method(answer: jsonrpc.Response) -> bool:
    return isinstance(answer, jsonrpc.Error) and answer.error.code == jsonrpc.METHOD_NOT_FOUND
