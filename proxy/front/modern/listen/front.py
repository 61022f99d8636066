"""`subscriptions/listen` (SEP-2575): one long-lived SSE stream of the notifications a client opted into.

A listen request holds a legacy session of its own (it is never shared): the session's standalone-stream
notifications — `notifications/{tools,prompts,resources}/list_changed`, and `notifications/resources/updated`
for the URIs it subscribed upstream with `resources/subscribe` — are relayed, each stamped with the
subscription id (the listen request's JSON-RPC id). With the Tasks extension, `taskIds` subscribes to
`notifications/tasks` for tasks this replica runs. The acknowledgement comes first and says what is honored;
keep-alive comments follow while nothing happens. Closing the stream ends the subscription: the upstream
subscriptions are undone and the session closed. At shutdown the stream ends gracefully with the listen
request's result; an upstream session that dies ends it abruptly (the client re-listens).

The same stream serves a legacy client's standalone GET stream (listen_legacy.py `LegacyStream`): written
as its legacy server would, and its resource subscriptions added while it runs (`_add_uri`).

A legacy server's notifications belong to one session: the listener hears what the server tells every
session (a changed tool list announced to all) and the updates of the resources it subscribed itself.

On an aggregated route every upstream is listened to: a legacy one on a session as above, a 2026-07-28 one
(upstream/era.py) with a listen stream of the proxy's own (listen/modern.py) whose filter is the client's
part for it (a URI goes to the upstream that listed it; one no upstream listed, to the first legacy upstream
that takes it, else to the modern ones).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import structlog
from aiohttp import web

from proxy.calls.wording import too_many_sessions, unavailable
from proxy.config import FrontConfig
from proxy.front.modern.aggregate.front import AggregateFront
from proxy.front.modern.aggregate.list_cache import ListCache
from proxy.front.modern.aggregate.lists import KeyFor
from proxy.front.modern.listen.filter import LIST_CHANGED, MAX_ITEMS, Refused, Wanted, parse_filter
from proxy.front.modern.listen.modern import ModernMember
from proxy.front.modern.relay.native import NativeRelay
from proxy.front.reply import SSE_HEADERS, json_response
from proxy.front.standalone import RESOURCE_UPDATED, LegacyStream
from proxy.observe.line import Outcome, RequestLine
from proxy.routes.table import Route
from proxy.tasks.front import TaskFront
from proxy.tasks.policy import declares_tasks, missing_capability
from proxy.translate.request import ModernRequest
from proxy.upstream.base import UpstreamError, UpstreamSession
from proxy.upstream.pool import PoolExhausted, PoolKey, SessionPool
from proxy.wire import jsonrpc, mcp
from proxy.wire.sse import encode_comment, encode_event

log = structlog.get_logger(__name__)

BACKLOG = 1024  # notifications queued for a slow client; past it the stream ends (the client re-listens)
TICK = 1.0  # how often the stream looks at shutdown and at its upstream session
UPSTREAM_TIMEOUT = 30.0
OwnerOf = Callable[[str], Awaitable[str | None]]  # the upstream that listed a URI, if known


class RuntimeStateView(Protocol):
    @property
    def draining(self) -> bool: ...


@dataclass(slots=True)
class _Subscription:
    """What one listen stream honors, and what it must undo when it ends."""

    id: jsonrpc.RequestId
    methods: set[str] = field(default_factory=set)  # relayed upstream notification methods
    uris: list[str] = field(default_factory=list)  # subscribed upstream
    task_ids: list[str] = field(default_factory=list)
    sessions: list[tuple[str, PoolKey, UpstreamSession]] = field(default_factory=list)  # upstream, key
    modern: list[ModernMember] = field(default_factory=list)  # an aggregate's 2026-07-28 upstreams
    modern_keys: list[tuple[str, PoolKey]] = field(default_factory=list)  # theirs, for a URI added later
    ended: bool = False  # undone: a URI added now is not subscribed
    uri_sessions: dict[str, UpstreamSession] = field(default_factory=dict)  # who took each subscription
    unwatch: list[Callable[[], None]] = field(default_factory=list)
    queue: asyncio.Queue[jsonrpc.Notification | None] = field(default_factory=lambda: asyncio.Queue(BACKLOG))

    def push(self, note: jsonrpc.Notification | None) -> None:
        """Queue a notification (None: the stream must end). A full backlog ends the stream."""
        try:
            self.queue.put_nowait(note)
        except asyncio.QueueFull:
            with contextlib.suppress(asyncio.QueueEmpty):
                self.queue.get_nowait()
            self.queue.put_nowait(None)

    def on_upstream(self, note: jsonrpc.Notification) -> None:
        if note.method in self.methods:
            self.push(note)

    def acknowledged(self) -> dict[str, Any]:
        honored: dict[str, Any] = {
            flag: True for flag, (_, method) in LIST_CHANGED.items() if method in self.methods
        }
        if self.uris:
            honored["resourceSubscriptions"] = list(self.uris)
        if self.task_ids:
            honored["taskIds"] = list(self.task_ids)
        return honored


class ListenFront:
    def __init__(
        self,
        *,
        front: FrontConfig,
        pools: Mapping[str, SessionPool],
        state: RuntimeStateView,
        tasks: TaskFront | None = None,
        relay: NativeRelay | None = None,  # an aggregate's modern upstreams (None: every one taken as legacy)
        aggregate: AggregateFront | None = None,  # aggregated routes (None: none configured)
    ) -> None:
        self._aggregate = aggregate
        self._front = front
        self._pools = pools
        self._state = state
        self._tasks = tasks
        self._native = relay
        self._hear = ListCache.deaf if aggregate is None else aggregate.lists.cache.hearing  # list_changed

    async def serve(
        self,
        request: web.Request,
        *,
        upstream: str,
        req: ModernRequest,
        key: PoolKey,
        principal: str,
        line: RequestLine,
        route: Route | None = None,
        key_for: KeyFor | None = None,
        legacy: LegacyStream | None = None,
    ) -> web.StreamResponse:
        """On an aggregated `route` (`key_for`: the client's key on each of its upstreams) every upstream is
        listened to; one that cannot be reached is left out (logged), unless none can, and a URI's
        `resourceSubscriptions` go to the upstream that listed it. `legacy`: a legacy client's GET stream."""
        msg = req.request
        sub = _Subscription(msg.id)
        members: Sequence[tuple[str, PoolKey]] = [(upstream, key)]
        owner_of: OwnerOf | None = None
        if route is not None and key_for is not None and self._aggregate is not None:
            members, owner_of = self._aggregate.listen(route, key_for)
        try:
            wanted = parse_filter(msg.params)
            await self._subscribe(
                sub, wanted=wanted, members=members, req=req, principal=principal, owner_of=owner_of
            )
        except Refused as refused:
            await self._undo(sub)
            line.set_outcome(Outcome.FAILED, refused.error.code)
            if legacy is not None:  # a GET has no JSON-RPC answer: an HTTP status saying why
                return _legacy_refusal(refused.error)
            return json_response(jsonrpc.Error(msg.id, refused.error))
        except BaseException:
            await asyncio.shield(self._undo(sub))
            raise
        if legacy is not None:  # URIs the client subscribes to from now on (and meanwhile) join the listen
            legacy.add = functools.partial(self._add_uri, sub, req, owner_of)
            for uri in legacy.uris.difference(sub.uris):
                await legacy.subscribe(uri)
        honored = sub.acknowledged()  # task ids are bearer handles: only counted in the log
        line.subscription = {k: len(v) if isinstance(v, list) else v for k, v in honored.items()}
        stream = web.StreamResponse(status=200, headers=SSE_HEADERS)
        try:
            await stream.prepare(request)
            if legacy is None:
                ack = jsonrpc.Notification(mcp.LISTEN_ACKNOWLEDGED, {"notifications": honored})
                await stream.write(_event(ack, sub.id))
            line.set_outcome(await self._relay(request, stream, sub, legacy))
            if (
                line.outcome is Outcome.COMPLETE and legacy is None
            ):  # graceful end: the listen request's own result
                result = {"resultType": mcp.RESULT_COMPLETE, "_meta": {mcp.META_SUBSCRIPTION_ID: sub.id}}
                await stream.write(encode_event(jsonrpc.dumps(jsonrpc.Result(sub.id, result)).decode()))
            if line.outcome is not Outcome.CLIENT_CLOSED:
                await stream.write_eof()
        except ConnectionResetError:
            line.set_outcome(Outcome.CLIENT_CLOSED)  # the client ended the subscription
        except asyncio.CancelledError:
            line.set_outcome(Outcome.CLIENT_CLOSED)
            raise
        finally:
            await asyncio.shield(self._undo(sub))
        return stream

    async def _subscribe(
        self,
        sub: _Subscription,
        *,
        wanted: Wanted,
        members: Sequence[tuple[str, PoolKey]],
        req: ModernRequest,
        principal: str,
        owner_of: OwnerOf | None = None,
    ) -> None:
        if wanted.task_ids and not declares_tasks(req.request.params):
            raise Refused(missing_capability("notifications.taskIds"))
        for token in wanted.task_ids:  # a task id names its upstream: one member's watch takes it
            for upstream, _ in members:
                unwatch = self._tasks.watch(token, upstream, principal, sub.push) if self._tasks else None
                if unwatch is not None:
                    sub.task_ids.append(token)
                    sub.unwatch.append(unwatch)
                    break
        if not (wanted.flags or wanted.uris):
            return
        refused: Refused | None = None
        modern: list[tuple[str, PoolKey]] = []
        for upstream, key in members:
            if self._native is not None and await self._native.modern(upstream, key.forwarded):
                modern.append((upstream, key))
                sub.modern_keys.append((upstream, key))
                continue
            try:
                session = await self._pools[upstream].acquire(key)
            except PoolExhausted as exc:
                refused = Refused(too_many_sessions(exc))
            except UpstreamError as exc:
                refused = Refused(unavailable(upstream, exc))
            else:
                sub.sessions.append((upstream, key, session))
                continue
            if len(members) > 1:
                log.warning("listen.upstream_left_out", upstream=upstream, reason=refused.error.message)
        owners = {uri: await owner_of(uri) if owner_of is not None else None for uri in wanted.uris}
        for _, _, session in sub.sessions:
            capabilities = session.info.capabilities
            for flag in wanted.flags:
                kind, method = LIST_CHANGED[flag]
                if kind in capabilities:  # a server without prompts never changes its prompt list
                    sub.methods.add(method)
            session.watch(sub.on_upstream)
        for uri, owner in owners.items():  # on the upstream that listed it (an aggregate), else the first
            for upstream, _, session in sub.sessions:
                if "resources" not in session.info.capabilities or owner not in (None, upstream):
                    continue
                if await _request_ok(session, "resources/subscribe", uri):
                    sub.uri_sessions[uri] = session
                    sub.uris.append(uri)
                    break
        for one in modern:
            refused = await self._listen_modern(sub, one, wanted=wanted, owners=owners, req=req) or refused
        if not (sub.sessions or sub.modern) and refused is not None:
            raise refused
        if sub.uris:
            sub.methods.add(RESOURCE_UPDATED)

    async def _listen_modern(
        self,
        sub: _Subscription,
        member: tuple[str, PoolKey],
        *,
        wanted: Wanted,
        owners: Mapping[str, str | None],
        req: ModernRequest,
    ) -> Refused | None:
        """Listen to one modern member of an aggregate for the client's flags and the URIs that are its
        (the refusal to give if no upstream can be listened to: this one did not acknowledge)."""
        assert self._native is not None
        upstream, key = member
        uris = [u for u, owner in owners.items() if owner in (None, upstream) and u not in sub.uris]
        notifications: dict[str, Any] = {flag: True for flag in wanted.flags}
        if uris:
            notifications["resourceSubscriptions"] = uris
        listener = ModernMember(self._native, upstream, self._hear(upstream, sub.on_upstream))
        meta = req.request.params.get("_meta")
        honored = await listener.open(sub.id, notifications, meta=meta, forwarded=key.forwarded)
        if honored is None:
            if listener.refusal is not None and listener.refusal.code == jsonrpc.METHOD_NOT_FOUND:
                return Refused(listener.refusal)  # it serves no listen (FastMCP 4.2.3): not a failure
            return Refused(unavailable(upstream, "no acknowledgement of the proxy's listen request"))
        if sub.ended:  # the stream ended while this one opened (a URI added late): nothing may outlive it
            await listener.close()
            return None
        sub.modern.append(listener)
        sub.methods.update(method for flag, (_, method) in LIST_CHANGED.items() if honored.get(flag) is True)
        taken = honored.get("resourceSubscriptions")
        for uri in taken if isinstance(taken, list) else []:
            if uri in uris:  # its own listen stream holds the subscription: nothing to undo here
                sub.uris.append(uri)
        return None

    async def _add_uri(
        self, sub: _Subscription, req: ModernRequest, owner_of: OwnerOf | None, uri: str
    ) -> bool:
        """Subscribe to `uri` on the running listen: the legacy member that listed it (or the first that
        takes it), else a listen of its own to a modern member. False: none took it, or too many."""
        if uri in sub.uris:
            return True
        if len(sub.uris) >= MAX_ITEMS or sub.ended:
            return sub.ended  # an ended stream's URIs are made by the session's next GET
        owner = await owner_of(uri) if owner_of is not None else None
        for upstream, _, session in sub.sessions:
            if "resources" not in session.info.capabilities or owner not in (None, upstream):
                continue
            if await _request_ok(session, "resources/subscribe", uri):
                sub.uri_sessions[uri] = session
                sub.uris.append(uri)
                break
        else:
            wanted, owners = Wanted([], [uri], []), {uri: owner}
            for member in [m for m in sub.modern_keys if owner in (None, m[0])]:
                await self._listen_modern(sub, member, wanted=wanted, owners=owners, req=req)
                if uri in sub.uris:
                    break
        if uri in sub.uris:
            sub.methods.add(RESOURCE_UPDATED)
        return uri in sub.uris

    async def _relay(
        self,
        request: web.Request,
        stream: web.StreamResponse,
        sub: _Subscription,
        legacy: LegacyStream | None,
    ) -> Outcome:
        """Write notifications as they come, keep-alives meanwhile. Returns how the stream ended."""
        loop = asyncio.get_running_loop()
        interval = self._front.keepalive_s
        next_keepalive = loop.time() + interval if interval > 0 else None
        while True:
            wait = TICK if next_keepalive is None else max(0.0, min(TICK, next_keepalive - loop.time()))
            try:
                async with asyncio.timeout(wait):
                    note = await sub.queue.get()
            except TimeoutError:
                if request.transport is None or request.transport.is_closing():
                    return Outcome.CLIENT_CLOSED
                if self._state.draining:
                    return Outcome.COMPLETE
                if legacy is not None and legacy.ended.is_set():
                    return Outcome.REPLACED
                if any(not s.alive for _, _, s in sub.sessions) or any(not m.alive for m in sub.modern):
                    return Outcome.UPSTREAM_LOST
                if next_keepalive is not None and loop.time() >= next_keepalive:
                    await stream.write(encode_comment(" keep-alive"))
                    next_keepalive = loop.time() + interval
                continue
            if note is None:
                return Outcome.BACKLOG_OVERFLOW
            event = _event(note, sub.id) if legacy is None else legacy.event(note)
            if event is not None:
                await stream.write(event)

    async def _undo(self, sub: _Subscription) -> None:
        sub.ended = True
        for unwatch in sub.unwatch:
            unwatch()
        members, sub.modern = sub.modern, []
        await asyncio.gather(*(member.close() for member in members))
        sessions, sub.sessions = sub.sessions, []
        for upstream, key, session in sessions:
            session.watch(None)
            if session.alive:
                for uri in [u for u, s in sub.uri_sessions.items() if s is session]:
                    await _request_ok(session, "resources/unsubscribe", uri)
            self._pools[upstream].release(key, session, reusable=False)


def _legacy_refusal(error: jsonrpc.ErrorObject) -> web.Response:
    """A legacy GET stream no upstream can feed: 405 when none serves a listen (as a legacy server without a
    standalone stream answers: the client stops asking), else 503 (the client may try again)."""
    if error.code == jsonrpc.METHOD_NOT_FOUND:
        why = "No standalone stream: the upstream sends no notifications outside a request"
        response = json_response(jsonrpc.error(None, jsonrpc.INVALID_REQUEST, why), 405)
        response.headers["Allow"] = "POST, DELETE"
        return response
    return json_response(jsonrpc.Error(None, error), 503)


def _event(note: jsonrpc.Notification, subscription: jsonrpc.RequestId) -> bytes:
    """One SSE event: the notification, its `_meta` stamped with the subscription id."""
    meta = note.params.get("_meta")
    params = {
        **note.params,
        "_meta": {**(meta if isinstance(meta, dict) else {}), mcp.META_SUBSCRIPTION_ID: subscription},
    }
    return encode_event(jsonrpc.dumps(jsonrpc.Notification(note.method, params)).decode())


async def _request_ok(session: UpstreamSession, method: str, uri: str) -> bool:
    """`resources/subscribe` / `unsubscribe` for `uri`: did the upstream accept it?"""
    try:
        reply = await session.request(method, {"uri": uri}, UPSTREAM_TIMEOUT)
    except UpstreamError as exc:
        log.info("listen.upstream_refused", method=method, error=str(exc))
        return False
    return isinstance(reply, jsonrpc.Result)
