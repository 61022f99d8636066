"""The 2026-07-28 pipeline: one checked request to its answer, shared by the HTTP front (front.py) and the
in-process one the mirror asks (inner.py), which differ only in their transport adapter — a `Replier` that
streams to the client's POST, or `InProcess` that hands notifications to the mirror.

The job is planned once (front/plan.py, gathered by front/planner.py): an aggregated route names the member
upstream first (aggregate.py) or answers itself; then the native relay (relay.py), the proxy's own calls over
a legacy session (`adapt`: the call service, plain.py, proxy/tasks), or a listen (handed back as `Listening`
for the adapter to serve: a long-lived stream is HTTP's). A relayed request the upstream answered the
legacy way before anything reached the client (`NotModern`) is planned once more with the era asked again.

Both adapters get the same checks: the draining refusal of a new call (a mirrored round's first request
too — the mirror refuses first with a 503 the legacy client retries, and this one holds should draining
begin between the two), the same fallback when an upstream is not modern after all.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import NamedTuple, Protocol, TypeVar

from aiohttp import web

from proxy.calls.outcomes import CallLink, CallRequest, Forward, InvalidRequestState, OwnerGone
from proxy.calls.service import CallService
from proxy.calls.wording import invalid_state, method_not_found, shutting_down, unavailable_answer
from proxy.config import UpstreamConfig
from proxy.front.address import AddressSource
from proxy.front.checks import Refusal
from proxy.front.modern.aggregate.front import AggregateFront, Own, Routed
from proxy.front.modern.outcome import answer
from proxy.front.modern.peer_route import key_not_held
from proxy.front.modern.plain import PlainRequests
from proxy.front.modern.relay.native import NativeRelay
from proxy.front.peers import Peers
from proxy.front.plan import Job, RouteKind, UpstreamEra, WrongEra, needs_era, plan
from proxy.front.planner import Planner
from proxy.front.reply import Notes
from proxy.observe.line import Outcome, RequestLine
from proxy.routes.policy import Grant
from proxy.routes.table import Route as AggregatedRoute
from proxy.tasks.front import TaskFront
from proxy.translate.request import ModernRequest
from proxy.upstream.modern import NotModern
from proxy.upstream.pool import PoolKey, PoolKeys
from proxy.wire import jsonrpc, mcp

T = TypeVar("T")
# The plan's values the path of every request compares with, looked up once (an enum member is a class
# attribute found through the enum's metaclass).
_OWN, _MEMBER, _UNKNOWN = RouteKind.OWN, RouteKind.MEMBER, UpstreamEra.UNKNOWN
_RELAY, _LISTEN, _ADAPT = Job.RELAY, Job.LISTEN, Job.ADAPT
_ERROR = jsonrpc.Error  # (only an error can say the legacy way never ran a call: the rest is not looked at)
AGAIN = "send the request again (another replica will take it)"  # what a draining replica tells a new call


class Sink(Notes, Protocol):
    """Where the pipeline's notifications go, and how a long piece of work is awaited (front/reply.py)."""

    @property
    def written(self) -> bool: ...  # something of this request reached its client: no planning again

    async def kept_alive(self, work: Awaitable[T], interval: float) -> T: ...


class DrainingView(Protocol):
    @property
    def draining(self) -> bool: ...


@dataclass(frozen=True, slots=True)
class Listening:
    """The job is a listen (listen.py): its stream is the adapter's to serve."""

    upstream: str
    req: ModernRequest
    key: PoolKey
    key_for: Callable[[str], PoolKey]


@dataclass(frozen=True, slots=True)
class Forwarded:
    """The call is held by another replica (`forward`); `again` handles it here if that owner is gone."""

    forward: Forward
    again: Callable[[OwnerGone], Awaitable[jsonrpc.Response | Forward]]


class Asker(NamedTuple):
    """Who asks, as the front resolved it: the client's HTTP request (its headers, its address), the
    principal, validate mode's headers for upstream and what its token grants. (A named tuple: made for
    every request, in C.)"""

    request: web.Request
    principal: str
    upstream_headers: tuple[tuple[str, str], ...] | None
    grant: Grant | None


class Pipeline:
    def __init__(
        self,
        *,
        upstreams: Mapping[str, UpstreamConfig],
        calls: CallService,
        peers: Peers,
        state: DrainingView,
        planner: Planner,
        plain: PlainRequests,
        keepalive_s: float,
        addresses: AddressSource,
        tasks: TaskFront | None = None,
        relay: NativeRelay | None = None,
        aggregate: AggregateFront | None = None,
    ) -> None:
        self._upstreams, self._calls, self._peers, self._state = upstreams, calls, peers, state
        self.planner, self.plain, self._keepalive = planner, plain, keepalive_s
        self._tasks, self.relay, self._aggregate = tasks, relay, aggregate
        self._keys = PoolKeys()
        self._addresses = addresses  # each call's client address (its share)

    async def answer(
        self,
        upstream: str,
        req: ModernRequest,
        who: Asker,
        *,
        sink: Sink,
        line: RequestLine,
        link: CallLink,
        route: AggregatedRoute | None = None,
        local_only: bool = False,
        legacy_way: bool = False,
    ) -> jsonrpc.Response | Forwarded | Listening:
        """`req`'s answer on `upstream` (or the aggregated `route` of that name). `local_only`: a retry is
        never forwarded to another replica; `legacy_way`: a tool call goes the legacy way even to a two-era
        upstream (the mirror's `legacy_tools`). Raises Refusal, UpstreamAuthChallenge (the adapter words
        them)."""
        msg = req.request
        kind = _OWN
        if route is not None:  # the aggregate job: the route answers, or names the member upstream
            kind = _MEMBER

            def key_for(name: str) -> PoolKey:
                return self.pool_key(name, req, who)

            upstream, req, own = await self.routed(
                route, req, principal=who.principal, grant=who.grant, key_for=key_for, line=line
            )
            if own is not None and msg.method != mcp.LISTEN:
                return await sink.kept_alive(own(), self._keepalive)
        key = self.pool_key(upstream, req, who)
        if self._state.draining and msg.method in mcp.MRTR_METHODS and req.request_state is None:
            raise Refusal(503, shutting_down(AGAIN))
        if route is not None and msg.method == mcp.LISTEN:  # a route's listen listens to every member
            job = Job.LISTEN
        else:
            s, job = self.planner.modern(upstream, req, kind, legacy_way=legacy_way)
            if s.era is _UNKNOWN and needs_era(s):  # no verdict yet, and it decides: probed
                s = await self.planner.probed(s, upstream, key.forwarded)
                job = plan(s)
            if job is _RELAY:
                try:
                    return await self._relayed(upstream, req, key, who, sink=sink, line=line, route=route)
                except WrongEra as wrong:
                    job = await self.planner.again(s, wrong, key.forwarded)
                    if job is Job.RELAY:  # asked again, still modern: the failure is the answer
                        line.upstream_era = None
                        return unavailable_answer(msg.id, upstream, wrong.cause or wrong, line)
                    line.upstream_era = None
        if job is _LISTEN:
            return Listening(upstream, req, key, lambda name: self.pool_key(name, req, who))
        adapted = self.adapt(
            upstream,
            req,
            key,
            who.principal,
            sink=sink,
            line=line,
            link=link,
            address=self._addresses.of(who.request),  # (the adapt job's only: its call's share)
            local_only=local_only,
        )
        reply = await sink.kept_alive(adapted, self._keepalive)
        if job is _ADAPT and type(reply) is _ERROR and self._era_changed_under(upstream, reply, sink):
            # the legacy way never ran it
            s = await self.planner.probed(s, upstream, key.forwarded)
            if plan(s) is _RELAY:  # an in-place swap to a 2026-07-28 server: planned again, once
                try:
                    return await self._relayed(upstream, req, key, who, sink=sink, line=line, route=route)
                except WrongEra as wrong:  # flapped: the first failure stays the answer
                    self.planner.eras.suspect(upstream, wrong.reason)
        if isinstance(reply, Forward):
            return Forwarded(
                reply,
                lambda gone: self._again(
                    upstream, req, key, who, sink=sink, line=line, link=link, owner_gone=gone
                ),
            )
        return reply

    def _era_changed_under(self, upstream: str, reply: object, sink: Sink) -> bool:
        """Whether the adapt job failed before the upstream processed anything while the era went suspect
        (relay.py `era_changed_under`), with nothing written to the client yet: safe to plan again."""
        relay = self.relay
        return relay is not None and not sink.written and relay.era_changed_under(upstream, reply)

    async def _again(
        self,
        upstream: str,
        req: ModernRequest,
        key: PoolKey,
        who: Asker,
        *,
        sink: Sink,
        line: RequestLine,
        link: CallLink,
        owner_gone: OwnerGone,
    ) -> jsonrpc.Response | Forward:
        work = self.adapt(
            upstream, req, key, who.principal, sink=sink, line=line, link=link,
            address=self._addresses.of(who.request),
            local_only=True, owner_gone=owner_gone,
        )  # fmt: skip
        return await sink.kept_alive(work, self._keepalive)

    async def _relayed(
        self,
        upstream: str,
        req: ModernRequest,
        key: PoolKey,
        who: Asker,
        *,
        sink: Sink,
        line: RequestLine,
        route: AggregatedRoute | None,
    ) -> jsonrpc.Response:
        """The relay job (relay.py; `route`: what is bound depends on it). An upstream that answered as a
        legacy server before anything reached the client raises WrongEra: planned again."""
        assert self.relay is not None  # planned only with a relay
        work = self.relay.relay(
            who.request,
            upstream,
            req,
            principal=who.principal,
            forwarded=key.forwarded,
            replier=sink,
            line=line,
            route=None if route is None else route.name,
        )
        try:
            return await sink.kept_alive(work, self._keepalive)
        except NotModern as exc:
            if sink.written:
                self.planner.eras.suspect(upstream, f"a modern request was answered the legacy way: {exc}")
                return unavailable_answer(req.request.id, upstream, exc, line)
            raise WrongEra(upstream, f"a modern request was answered the legacy way: {exc}", exc) from None

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

    async def adapt(
        self,
        upstream: str,
        req: ModernRequest,
        key: PoolKey,
        principal: str,
        *,
        sink: Notes,
        line: RequestLine,
        link: CallLink,
        address: str = "",
        local_only: bool = False,
        owner_gone: OwnerGone | None = None,
    ) -> jsonrpc.Response | Forward:
        """The adapt job: the proxy serves the request itself — `ping`, discover, lists and completion
        (plain.py), the Tasks extension, and calls over a legacy session (the call service: inline requests
        become `input_required` rounds)."""
        msg = req.request
        if msg.method == "ping":
            line.set_outcome(Outcome.COMPLETE)
            return jsonrpc.Result(msg.id, {"resultType": mcp.RESULT_COMPLETE})
        if msg.method == "server/discover":
            return await self.plain.discover(upstream, msg, key, line)
        if msg.method in mcp.FORWARDED_METHODS:
            return await self.plain.forward(upstream, req, key, line)
        if msg.method in mcp.TASK_METHODS and self._tasks is not None:
            return await self._tasks.handle(upstream, req, principal, line, local_only=local_only)
        if msg.method not in mcp.MRTR_METHODS:
            line.set_outcome(Outcome.UNKNOWN_METHOD)
            return jsonrpc.Error(msg.id, method_not_found(msg.method))
        call = CallRequest(
            upstream,
            msg.method,
            req.upstream_params,
            key,
            principal,
            link,
            log_level=req.log_level,
            address=address,
        )
        try:
            if self._tasks is not None and self._tasks.applies(req):  # may become a task (proxy/tasks)
                outcome = await self._tasks.call(
                    call, req, sink.notify, local_only=local_only, owner_gone=owner_gone
                )
            elif req.request_state is None:
                outcome = await self._calls.start(call, sink.notify)
            else:
                outcome = await self._calls.resume(
                    call,
                    req.request_state,
                    req.input_responses,
                    sink.notify,
                    local_only=local_only,
                    owner_gone=owner_gone,
                )
        except InvalidRequestState as exc:
            line.set_outcome(Outcome.HANDLE_REJECTED, reason=exc.reason)
            if exc.reason == "unknown_key":
                raise key_not_held(req.request_state, self._peers.ring(), line) from None
            return jsonrpc.Error(msg.id, invalid_state())
        return answer(msg, outcome, line, started=sink.started)

    def pool_key(self, upstream: str, req: ModernRequest, who: Asker) -> PoolKey:
        """Sessions per capability set, forwarded headers (validate mode: the gate's) and principal."""
        forwarded = who.upstream_headers
        if forwarded is None:
            headers, names = who.request.headers, self._upstreams[upstream].forward_headers
            forwarded = tuple([(n, headers[n]) for n in names if n in headers])
        return self._keys.of(
            req.capabilities, forwarded, who.principal
        )  # one object per value: upstream/pool.py
