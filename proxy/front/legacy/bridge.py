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
import contextlib
import secrets
import time
from collections import deque
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import aiohttp
import structlog
from aiohttp import web

from proxy.config import Config, UpstreamConfig
from proxy.front.legacy.bridge_wire import (
    declared_capabilities,
    initialize_result,
    offered_versions,
    upstream_cancel,
    with_id,
)
from proxy.front.reply import SSE_HEADERS, json_response, wants
from proxy.handle import HandleCodec, HandleError
from proxy.handle.session_ids import LegacySession, open_session, seal_session
from proxy.upstream.base import Inbox, TransportLost, UpstreamError, UpstreamSession
from proxy.upstream.connect import open_upstream_session
from proxy.upstream.propagation import detach_from_request
from proxy.upstream.router import NoCallAnswer
from proxy.wire import jsonrpc, mcp
from proxy.wire.sse import encode_comment, encode_event

log = structlog.get_logger(__name__)

TICK = 1.0  # how often waits look at cancellation, shutdown and the upstream session


class RuntimeStateView(Protocol):
    @property
    def draining(self) -> bool: ...


@dataclass(frozen=True, slots=True)
class BridgeSettings:
    call_timeout: float = 300.0  # calls.call_timeout_s: longest upstream silence within a call
    answer_timeout: float = 600.0  # calls.parked_ttl_s: longest wait for the client's answer to the upstream
    keepalive: float = 15.0  # front.keepalive_s: SSE comment interval on quiet streams (0: none)
    get_grace: float = 5.0  # a held server request waits this long for a GET stream (then: no-call answer)
    cancel_grace: float = 2.0  # after the client cancels its call: wait this long for the upstream's answer
    max_held: int = 256  # messages held for the GET stream at most

    @classmethod
    def from_config(cls, config: Config) -> BridgeSettings:
        calls = config.calls
        return cls(calls.call_timeout_s, calls.parked_ttl_s, config.front.keepalive_s)


async def open_dedicated(
    http: aiohttp.ClientSession,
    config: UpstreamConfig,
    *,
    versions: tuple[str, ...],
    capabilities: Mapping[str, Any],
    headers: Mapping[str, str],
    no_call: NoCallAnswer,
) -> UpstreamSession:
    """A new, initialized session to an `sse`/`stdio` upstream for one legacy client. Raises UpstreamError."""
    if config.transport not in ("sse", "stdio"):
        raise UpstreamError(f"transport {config.transport!r} is not bridged")
    return await open_upstream_session(
        http, config, versions=versions, capabilities=capabilities, headers=headers, no_call=no_call
    )


@dataclass(eq=False, slots=True)
class _Call:
    client_id: jsonrpc.RequestId
    upstream_id: jsonrpc.RequestId
    inbox: Inbox
    asked: set[jsonrpc.RequestId] = field(default_factory=set)  # server requests the client has not answered
    cancelled_at: float | None = None


class _Bridged:
    """One legacy client's session: its upstream session, its call in flight, what waits for a GET stream."""

    def __init__(
        self, config: UpstreamConfig, principal: str, settings: BridgeSettings, fallback: NoCallAnswer
    ) -> None:
        self.token = secrets.token_urlsafe(24)
        self.config, self.principal, self.settings = config, principal, settings
        self.session: UpstreamSession | None = None
        self.turn = asyncio.Lock()  # one receiving call at a time
        self.call: _Call | None = None
        self.held: deque[jsonrpc.Message] = deque()
        self.arrived = asyncio.Event()
        self.streams = 0  # GET streams attached
        self.busy = 0  # HTTP requests being handled (GET streams included)
        self.last_used = time.monotonic()
        self.closed = False
        self._fallback = fallback
        self._grace: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def alive(self) -> bool:
        return not self.closed and self.session is not None and self.session.alive

    def no_call(self, req: jsonrpc.Request) -> jsonrpc.Response | None:
        """The upstream session's no-call handler: the request goes to the client's GET stream."""
        return self.hold(req)

    def notify(self, note: jsonrpc.Notification) -> None:
        """The upstream session's listener for session-wide notifications."""
        self.hold(note)

    def hold(self, msg: jsonrpc.Message) -> jsonrpc.Response | None:
        """Keep `msg` for the GET stream. Returns the no-call answer for a request that cannot be held."""
        if self.closed or len(self.held) >= self.settings.max_held:
            return self._fallback(msg) if isinstance(msg, jsonrpc.Request) else None
        self.held.append(msg)
        self.arrived.set()
        if self.streams == 0 and isinstance(msg, jsonrpc.Request):
            self._start_grace()
        return None

    def attach(self) -> None:
        self.streams += 1
        if self._grace is not None:
            self._grace.cancel()
            self._grace = None

    def detach(self) -> None:
        self.streams -= 1
        if self.streams == 0 and any(isinstance(m, jsonrpc.Request) for m in self.held):
            self._start_grace()

    def _start_grace(self) -> None:
        if self._grace is None and not self.closed:
            self._grace = asyncio.get_running_loop().call_later(self.settings.get_grace, self._grace_over)

    def _grace_over(self) -> None:
        """No GET stream took the held messages in time: requests get the no-call answer, the rest goes."""
        self._grace = None
        if self.streams or self.closed:
            return
        for msg in self.held:
            if isinstance(msg, jsonrpc.Request) and (answer := self._fallback(msg)) is not None:
                self.answer_later(answer)
        self.held.clear()

    def answer_later(self, answer: jsonrpc.Response) -> None:
        self.spawn(self.send_quietly(answer))

    async def send_quietly(self, message: jsonrpc.Response | jsonrpc.Notification) -> None:
        if self.session is not None:
            with contextlib.suppress(UpstreamError):
                await self.session.send(message)

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.arrived.set()  # GET streams look up and end
        if self._grace is not None:
            self._grace.cancel()
        if self.session is not None:
            await self.session.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


class _Reply:
    """One POST's answer: SSE when the client accepts it (started at the first message), else JSON."""

    def __init__(self, request: web.Request) -> None:
        self._request = request
        self.sse = wants(request)[1]
        self._stream: web.StreamResponse | None = None

    async def send(self, msg: jsonrpc.Message) -> None:
        await (await self._open()).write(encode_event(jsonrpc.dumps(msg).decode()))

    async def keepalive(self) -> None:
        if self.sse:
            await (await self._open()).write(encode_comment(" keep-alive"))

    async def finish(
        self, msg: jsonrpc.Message | None, headers: Mapping[str, str] | None = None
    ) -> web.StreamResponse:
        if self._stream is None and not self.sse:
            response = json_response(msg, 200 if msg is not None else 202)
            response.headers.update(headers or {})
            return response
        stream = await self._open(headers)
        if msg is not None:
            await stream.write(encode_event(jsonrpc.dumps(msg).decode()))
        await stream.write_eof()
        return stream

    async def _open(self, headers: Mapping[str, str] | None = None) -> web.StreamResponse:
        if self._stream is None:
            self._stream = web.StreamResponse(status=200, headers={**SSE_HEADERS, **(headers or {})})
            await self._stream.prepare(self._request)
        return self._stream


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
    ) -> None:
        self._http, self._codec, self._upstreams = http, codec, upstreams
        self._no_call = no_call
        self._settings = settings or BridgeSettings()
        self._state = state
        self._sessions: dict[str, _Bridged] = {}
        self._reaper: asyncio.Task[None] | None = None

    @property
    def sessions(self) -> int:
        return len(self._sessions)

    async def handle(
        self, request: web.Request, upstream: str, principal: str, msg: jsonrpc.Message | None
    ) -> web.StreamResponse:
        """A legacy client's request, as the front parsed it (None for a GET or DELETE)."""
        if isinstance(msg, jsonrpc.Request) and msg.method == "initialize":
            return await self._initialize(request, self._upstreams[upstream], principal, msg)
        if mcp.SESSION_HEADER not in request.headers:
            return _error(400, "Missing Mcp-Session-Id (a legacy client starts with initialize)")
        bridged = self._find(request.headers[mcp.SESSION_HEADER], upstream, principal)
        if bridged is None:
            return _error(404, "Session not found")
        if not bridged.alive:  # its upstream is gone (a stdio child exited, an SSE stream ended)
            await self._forget(bridged, "upstream_lost")
            return _error(404, "Session not found")
        bridged.busy += 1
        try:
            if request.method == "DELETE":
                await self._forget(bridged, "deleted")
                return web.Response(status=200)
            if request.method == "GET":
                return await self._stream(request, bridged)
            if isinstance(msg, jsonrpc.Request):
                return await self._request(request, bridged, msg)
            assert bridged.session is not None and msg is not None
            if isinstance(msg, jsonrpc.Notification):
                if msg.method != mcp.INITIALIZED:
                    await self._notification(bridged, bridged.session, msg)
            else:  # the client's answer to a server request
                if bridged.call is not None and msg.id is not None:
                    bridged.call.asked.discard(msg.id)
                await bridged.session.send(msg)
            return web.Response(status=202)
        except UpstreamError as exc:
            log.warning("legacy_bridge.upstream_failed", upstream=upstream, error=str(exc))
            return _error(502, f"Upstream {upstream!r} unavailable")
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
        self, request: web.Request, config: UpstreamConfig, principal: str, msg: jsonrpc.Request
    ) -> web.StreamResponse:
        if self._state is not None and self._state.draining:
            return _error(
                503, "This proxy replica is shutting down; initialize again (another replica serves it)"
            )
        if sum(b.config.name == config.name for b in self._sessions.values()) >= config.pool.max_sessions:
            limit = f"Too many calls: {config.pool.max_sessions} legacy sessions open (pool.max_sessions)"
            return await _Reply(request).finish(jsonrpc.error(msg.id, jsonrpc.LIMIT_EXCEEDED, limit))
        bridged = _Bridged(config, principal, self._settings, self._no_call(config))
        try:
            bridged.session = await open_dedicated(
                self._http,
                config,
                versions=offered_versions(msg.params.get("protocolVersion"), config.protocol_versions),
                capabilities=declared_capabilities(msg.params),
                headers={n: request.headers[n] for n in config.forward_headers if n in request.headers},
                no_call=bridged.no_call,
            )
        except UpstreamError as exc:
            log.warning("legacy_bridge.open_failed", upstream=config.name, error=str(exc))
            return _error(502, f"Upstream {config.name!r} unavailable")
        bridged.session.watch(bridged.notify)
        self._sessions[bridged.token] = bridged
        if self._reaper is None or self._reaper.done():
            self._reaper = asyncio.ensure_future(self._reap())
        log.info("legacy_bridge.opened", upstream=config.name, session=bridged.session.session_id)
        sealed = seal_session(self._codec, LegacySession(config.name, bridged.token, principal))
        result = jsonrpc.Result(msg.id, initialize_result(bridged.session.info))
        return await _Reply(request).finish(result, {mcp.SESSION_HEADER: sealed})

    def _find(self, token: str, upstream: str, principal: str) -> _Bridged | None:
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

    async def _forget(self, bridged: _Bridged, why: str) -> None:
        if self._sessions.get(bridged.token) is bridged:
            del self._sessions[bridged.token]
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

    # -- requests -----------------------------------------------------------------------------------------

    async def _request(
        self, request: web.Request, bridged: _Bridged, msg: jsonrpc.Request
    ) -> web.StreamResponse:
        reply = _Reply(request)
        session = bridged.session
        assert session is not None
        if msg.method not in mcp.MRTR_METHODS:  # nothing asks the client during these: concurrent
            try:
                plain = await session.request(msg.method, msg.params, self._settings.call_timeout)
            except UpstreamError as exc:
                plain = jsonrpc.error(msg.id, jsonrpc.UPSTREAM_FAILED, f"Upstream failed: {exc}")
            return await reply.finish(with_id(plain, msg.id))
        try:
            async with asyncio.timeout(self._settings.call_timeout):
                await bridged.turn.acquire()
        except TimeoutError:
            busy = "the session's previous call is still running; send it again later"
            return await reply.finish(jsonrpc.error(msg.id, jsonrpc.UPSTREAM_TIMEOUT, busy))
        call: _Call | None = None
        handed_off = False
        try:
            inbox: Inbox = asyncio.Queue()
            call = bridged.call = _Call(msg.id, await session.call(msg.method, msg.params, inbox), inbox)
            answer = await self._pump(bridged, session, call, reply)
        except (asyncio.CancelledError, ConnectionError):  # the client went away: the call runs on
            if call is not None:
                bridged.spawn(self._orphan(bridged, session, call))
                handed_off = True
            raise
        finally:
            if not handed_off:
                self._end_call(bridged, session, call)
        return await reply.finish(answer)

    def _end_call(self, bridged: _Bridged, session: UpstreamSession, call: _Call | None) -> None:
        if call is not None:
            session.end_call()
            bridged.call = None
        bridged.turn.release()

    async def _orphan(self, bridged: _Bridged, session: UpstreamSession, call: _Call) -> None:
        """The call of a client that went away runs on: what it was asked gets an error upstream (nobody
        will answer it), what it is asked from now on goes to the GET stream, its response is dropped."""
        detach_from_request()
        log.info("legacy_bridge.client_gone", upstream=bridged.config.name, unanswered=len(call.asked))
        try:
            for rid in call.asked:
                bridged.answer_later(jsonrpc.error(rid, jsonrpc.INTERNAL_ERROR, "The client went away"))
            call.asked.clear()
            await self._pump(bridged, session, call, None)
        except Exception:
            log.exception("legacy_bridge.orphan_failed", upstream=bridged.config.name)
        finally:
            self._end_call(bridged, session, call)

    async def _pump(
        self, bridged: _Bridged, session: UpstreamSession, call: _Call, reply: _Reply | None
    ) -> jsonrpc.Response | None:
        """Pass the call's server requests and notifications on (to `reply`, else the GET stream) until its
        response, which comes back under the client's id. None: the client cancelled and nothing came."""
        settings, loop = self._settings, asyncio.get_running_loop()
        last = written = loop.time()
        while True:
            limit = settings.answer_timeout if call.asked else settings.call_timeout
            deadline = last + limit
            if call.cancelled_at is not None:
                deadline = min(deadline, call.cancelled_at + settings.cancel_grace)
            try:
                async with asyncio.timeout(max(0.0, min(TICK, deadline - loop.time()))):
                    item = await call.inbox.get()
            except TimeoutError:
                now = loop.time()
                if now >= deadline:
                    if call.cancelled_at is not None:
                        return None
                    cancel = {"requestId": call.upstream_id, "reason": "timed out in mrtr-proxy"}
                    await bridged.send_quietly(jsonrpc.Notification(mcp.CANCELLED, cancel))
                    why = f"Upstream silent for {limit:g}s; the call was cancelled upstream"
                    return jsonrpc.error(call.client_id, jsonrpc.UPSTREAM_TIMEOUT, why)
                if reply is not None and 0 < settings.keepalive <= now - written:
                    await reply.keepalive()
                    written = now
                continue
            last = loop.time()
            if isinstance(item, TransportLost):
                why = f"Upstream failed: {item.reason}; the call was not re-run"
                return jsonrpc.error(call.client_id, jsonrpc.UPSTREAM_FAILED, why)
            if isinstance(item, jsonrpc.Result | jsonrpc.Error):
                return with_id(item, call.client_id)
            if isinstance(item, jsonrpc.Request):
                call.asked.add(item.id)
            if reply is not None and reply.sse:
                await reply.send(item)
                written = loop.time()
            elif (answer := bridged.hold(item)) is not None:
                await bridged.send_quietly(answer)

    async def _notification(
        self, bridged: _Bridged, session: UpstreamSession, note: jsonrpc.Notification
    ) -> None:
        if note.method == mcp.CANCELLED:
            call = bridged.call
            mapped = upstream_cancel(note, call.client_id, call.upstream_id) if call is not None else None
            if call is None or mapped is None:
                return  # not the call in flight: the client's ids mean nothing upstream
            call.cancelled_at = asyncio.get_running_loop().time()
            note = mapped
        await session.send(note)

    # -- the GET stream -----------------------------------------------------------------------------------

    async def _stream(self, request: web.Request, bridged: _Bridged) -> web.StreamResponse:
        if not wants(request)[1]:
            return _error(406, "The GET stream is text/event-stream; accept it")
        stream = web.StreamResponse(status=200, headers=SSE_HEADERS)
        await stream.prepare(request)
        loop, interval = asyncio.get_running_loop(), self._settings.keepalive
        next_keepalive = loop.time() + interval
        bridged.attach()
        try:  # until the session ends, the replica drains, or the client goes (a write fails, or cancelled)
            while bridged.alive and not (self._state is not None and self._state.draining):
                while bridged.held:
                    msg = bridged.held.popleft()
                    try:
                        await stream.write(encode_event(jsonrpc.dumps(msg).decode()))
                    except BaseException:
                        bridged.held.appendleft(msg)  # not delivered: for the next GET stream
                        raise
                bridged.arrived.clear()
                try:
                    async with asyncio.timeout(TICK):
                        await bridged.arrived.wait()
                except TimeoutError:
                    if interval > 0 and loop.time() >= next_keepalive:
                        await stream.write(encode_comment(" keep-alive"))
                        next_keepalive = loop.time() + interval
            await stream.write_eof()
        except ConnectionError:
            pass
        finally:
            bridged.detach()
        return stream


def _error(status: int, message: str) -> web.Response:
    return json_response(jsonrpc.error(None, jsonrpc.INVALID_REQUEST, message), status)


__all__ = ["BridgeSettings", "LegacyBridge", "open_dedicated"]
