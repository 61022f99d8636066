"""The 2026-07-28 front: `POST /mcp` (and `/servers/<name>/mcp`), one JSON-RPC request per POST.

Parses and checks the request at the boundary, answers `server/discover` and `ping` itself, relays list and
completion requests, and hands `tools/call`, `prompts/get` and `resources/read` to the call service, which
turns the legacy server's inline requests into `input_required` rounds. One canonical log line per request.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import structlog
from aiohttp import web
from structlog.contextvars import bound_contextvars

from proxy.calls.service import (
    CallLink,
    CallRequest,
    CallService,
    Completed,
    Failed,
    Forward,
    InvalidRequestState,
    NeedsInput,
)
from proxy.config import FrontConfig, UpstreamConfig
from proxy.front.checks import InputLimits, ModernRequest, Refusal, check_modern, origin_allowed
from proxy.front.legacy import SESSION, LegacyRelay, is_legacy
from proxy.front.listen import ListenFront
from proxy.front.peers import FORWARD_PREFIX, Peers, PeerUnreachable
from proxy.front.principal import Resolver
from proxy.front.ratelimit import RateLimiter
from proxy.front.reply import Replier, json_response
from proxy.front.request_ids import REQUEST_ID_HEADER, request_id
from proxy.metrics import record_request
from proxy.pool import PoolKey, SessionPool
from proxy.tasks.front import TaskCreated, TaskFront
from proxy.tracing import Tracing
from proxy.upstream.base import UpstreamError
from proxy.upstream.propagation import propagating
from proxy.wire import jsonrpc, mcp
from proxy.wire.jsonrpc import ErrorObject

log = structlog.get_logger("proxy.request")


class RuntimeStateView(Protocol):
    @property
    def draining(self) -> bool: ...


INVALID_STATE_MESSAGE = "Invalid requestState"  # the one message for every handle rejection
PLAIN_TIMEOUT = 60.0


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
        relay: LegacyRelay,
        state: RuntimeStateView,
        tasks: TaskFront | None = None,  # the Tasks extension (proxy/tasks); None: no tasks
        listen: ListenFront | None = None,  # subscriptions/listen (front/listen.py); None: not served
        tracing: Tracing | None = None,  # None: no tracing (proxy/tracing.py)
    ) -> None:
        self._state = state
        self._tracing = tracing or Tracing()
        self._tasks = tasks
        self._listen = listen
        self._front = front
        self._peers = peers
        self._relay = relay
        self._principal = principal
        self._rate = RateLimiter(front.rate_limit_per_s, front.rate_burst)
        self._upstreams = upstreams
        self._by_host = {h.lower(): name for name, up in upstreams.items() for h in up.hosts}
        self._default = next(iter(upstreams))
        self._pools = pools
        self._calls = calls
        self._origins = frozenset(front.allowed_origins)
        self._limits = InputLimits(front.max_input_responses, front.max_input_response_bytes)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        started = time.perf_counter()
        rid = request_id(request.headers)
        span = self._tracing.start(request.headers)
        link = CallLink(span=span.ref)  # the call service says which call (and round) the request was
        line: dict[str, Any] = {"request_id": rid, "http_method": request.method, "path": request.path}
        try:
            # Every log line, and every upstream HTTP request, made while handling it carries the request id.
            with bound_contextvars(request_id=rid), propagating({REQUEST_ID_HEADER: rid, **span.headers}):
                try:
                    response = await self._handle(request, line, link)
                except Refusal as refusal:
                    line["outcome"] = f"refused:{refusal.error.code}"
                    response = json_response(jsonrpc.Error(line.get("id"), refusal.error), refusal.status)
        except web.HTTPException as exc:  # aiohttp answers with it (404: no such upstream)
            exc.headers[REQUEST_ID_HEADER] = rid
            span.finish({**_joined(line, link), "status": exc.status}, first_round=link.first_span)
            raise
        except BaseException as exc:  # the client went away, or a bug
            span.finish(_joined(line, link), first_round=link.first_span, error=exc)
            raise
        _joined(line, link)
        line["status"] = response.status
        line["duration_ms"] = round((time.perf_counter() - started) * 1000, 2)
        log.info("request", **line)
        record_request(request.app, line)  # the metrics, from the same line
        span.finish(line, first_round=link.first_span)
        if not response.prepared:  # one prepared while handling got it from echo_request_id
            response.headers[REQUEST_ID_HEADER] = rid
        return response

    async def _handle(self, request: web.Request, line: dict[str, Any], link: CallLink) -> web.StreamResponse:
        upstream = request.match_info.get("upstream") or self._by_host.get(
            _host_name(request.host), self._default
        )
        if upstream not in self._upstreams:
            raise web.HTTPNotFound(text=f"no upstream named {upstream!r}")
        line["upstream"] = upstream
        if not origin_allowed(request.headers.get("Origin"), request.host, self._origins):
            raise Refusal(403, ErrorObject(jsonrpc.INVALID_REQUEST, "Origin not allowed"))
        if request.method in ("GET", "DELETE") and SESSION in request.headers:
            return await self._legacy(
                request, upstream, None, None, line
            )  # a legacy client's stream or goodbye
        if request.method != "POST":
            line["outcome"] = "method_not_allowed"
            return web.Response(
                status=405, headers={"Allow": "POST"}, text="2026-07-28 clients use POST only"
            )
        body = await read_body(request, self._front.max_body_bytes)
        try:
            msg = jsonrpc.decode(body)
        except jsonrpc.InvalidMessage as exc:
            line["id"] = exc.request_id
            raise Refusal(400, ErrorObject(exc.code, str(exc))) from None
        if is_legacy(request, msg, _meta_version(msg)):
            line.update(method=getattr(msg, "method", "response"), id=getattr(msg, "id", None))
            return await self._legacy(request, upstream, body, msg, line)
        if isinstance(msg, jsonrpc.Notification):
            line.update(method=msg.method, outcome="accepted")
            return web.Response(status=202)
        if not isinstance(msg, jsonrpc.Request):
            raise Refusal(400, ErrorObject(jsonrpc.INVALID_REQUEST, "Clients send requests, not responses"))
        line.update(id=msg.id, method=msg.method)
        req = check_modern(msg, request.headers, limits=self._limits)
        principal = self._principal(request.headers)
        forwarded = request.path.startswith(FORWARD_PREFIX)
        if forwarded:
            line["forwarded_by"] = request.headers.get("X-Mrtr-Forwarded-By", "?")
            if req.request_state is None and msg.method not in mcp.TASK_METHODS:
                raise Refusal(400, ErrorObject(jsonrpc.INVALID_REQUEST, "The peer route only takes retries"))
        elif not self._rate.allow(principal):
            wait = self._rate.retry_after(principal)
            raise Refusal(
                429,
                ErrorObject(
                    jsonrpc.LIMIT_EXCEEDED,
                    f"Too many requests: at most {self._front.rate_limit_per_s:g}/s "
                    f"for this client (front.rate_limit_per_s); retry in {wait:.1f}s",
                ),
            )
        key = self._pool_key(upstream, req, request, principal)
        if self._state.draining and msg.method in mcp.MRTR_METHODS and req.request_state is None:
            raise Refusal(
                503,
                ErrorObject(
                    jsonrpc.SHUTTING_DOWN,
                    "This proxy replica is shutting down; send the request again (another "
                    "replica will take it)",
                ),
            )
        if msg.method == mcp.LISTEN and self._listen is not None:  # a long-lived stream of its own
            return await self._listen.serve(
                request, upstream=upstream, req=req, key=key, principal=principal, line=line
            )
        replier = Replier(request)

        async def dispatch(local_only: bool) -> jsonrpc.Response | Forward:
            work = self._dispatch(
                upstream=upstream,
                req=req,
                key=key,
                principal=principal,
                replier=replier,
                line=line,
                local_only=local_only,
                link=link,
            )
            return await self._with_keepalive(replier, work)

        answer = await dispatch(local_only=forwarded)
        if isinstance(answer, Forward):
            line["owner"] = answer.owner
            try:
                response = await self._peers.forward(answer.owner, request, body)
            except PeerUnreachable as exc:  # nothing reached the owner: handle it here (takeover or lost)
                line["owner_unreachable"] = str(exc)
                answer = await dispatch(local_only=True)
            else:
                line["outcome"] = f"forwarded:{response.status}"
                return response
        assert not isinstance(answer, Forward)
        return await replier.finish(answer, 404 if _is_unknown_method(answer) else 200)

    async def _legacy(
        self,
        request: web.Request,
        upstream: str,
        body: bytes | None,
        msg: jsonrpc.Message | None,
        line: dict[str, Any],
    ) -> web.StreamResponse:
        line["era"] = "legacy"
        principal = self._principal(request.headers)
        response = await self._relay.relay(request, upstream, principal, body, msg)
        line["outcome"] = f"relayed:{response.status}"
        return response

    async def _with_keepalive(
        self, replier: Replier, work: Coroutine[Any, Any, jsonrpc.Response | Forward]
    ) -> jsonrpc.Response | Forward:
        """Await `work`, writing a keep-alive comment every `front.keepalive_s` while it runs.

        A timer, not a task: most requests finish long before the first tick, and this runs for each one."""
        interval = self._front.keepalive_s
        if interval <= 0:
            return await work
        loop = asyncio.get_running_loop()
        writes: set[asyncio.Task[None]] = set()

        def tick() -> None:
            write = loop.create_task(replier.keepalive())
            writes.add(write)
            write.add_done_callback(writes.discard)
            timer[0] = loop.call_later(interval, tick)

        timer = [loop.call_later(interval, tick)]
        try:
            return await work  # cancelled with the handler if the client goes away: so is the call
        finally:
            timer[0].cancel()
            for write in list(writes):
                with contextlib.suppress(Exception):
                    await write

    async def _dispatch(
        self,
        *,
        upstream: str,
        req: ModernRequest,
        key: PoolKey,
        principal: str,
        replier: Replier,
        line: dict[str, Any],
        local_only: bool = False,
        link: CallLink | None = None,
    ) -> jsonrpc.Response | Forward:
        msg = req.request
        if msg.method == "ping":
            line["outcome"] = "complete"
            return jsonrpc.Result(msg.id, {"resultType": mcp.RESULT_COMPLETE})
        if msg.method == "server/discover":
            return await self._discover(upstream, msg, key, line)
        if msg.method in mcp.FORWARDED_METHODS:
            return await self._forward(upstream, req, key, line)
        if msg.method in mcp.TASK_METHODS and self._tasks is not None:
            return await self._tasks.handle(upstream, req, principal, line, local_only=local_only)
        if msg.method not in mcp.MRTR_METHODS:
            line["outcome"] = "unknown_method"
            return jsonrpc.error(msg.id, jsonrpc.METHOD_NOT_FOUND, f"Method not found: {msg.method}")
        call = CallRequest(upstream, msg.method, req.upstream_params, key, principal, link or CallLink())
        try:
            if self._tasks is not None and self._tasks.applies(req):  # may become a task (proxy/tasks)
                outcome = await self._tasks.call(call, req, replier.notify, local_only=local_only)
            elif req.request_state is None:
                outcome = await self._calls.start(call, replier.notify)
            else:
                outcome = await self._calls.resume(
                    call, req.request_state, req.input_responses, replier.notify, local_only=local_only
                )
        except InvalidRequestState as exc:
            line.update(outcome="handle_rejected", reason=exc.reason)
            return jsonrpc.error(msg.id, jsonrpc.INVALID_PARAMS, INVALID_STATE_MESSAGE)
        match outcome:
            case Completed(response=jsonrpc.Result(result=result)):
                line["outcome"] = "complete"
                return jsonrpc.Result(msg.id, complete(msg.method, result))
            case Completed(response=jsonrpc.Error(error=error)):
                line["outcome"] = f"upstream_error:{error.code}"
                return jsonrpc.Error(msg.id, error)
            case NeedsInput(input_requests=requests, request_state=state, round=rnd):
                line.update(outcome="input_required", round=rnd, input_keys=len(requests))
                return jsonrpc.Result(
                    msg.id,
                    {
                        "resultType": mcp.RESULT_INPUT_REQUIRED,
                        "inputRequests": requests,
                        "requestState": state,
                    },
                )
            case Failed(error=error):
                line["outcome"] = f"failed:{error.code}"
                return jsonrpc.Error(msg.id, error)
            case Forward():
                return outcome
            case TaskCreated(result=result, task=task):
                line.update(outcome="task", task=task)
                return jsonrpc.Result(msg.id, result)
        raise AssertionError(outcome)  # pragma: no cover

    async def _discover(
        self, upstream: str, msg: jsonrpc.Request, key: PoolKey, line: dict[str, Any]
    ) -> jsonrpc.Response:
        try:
            info = await self._pools[upstream].server_info(key)
        except (UpstreamError, TimeoutError) as exc:
            line["outcome"] = "upstream_failed"
            return jsonrpc.error(msg.id, jsonrpc.UPSTREAM_FAILED, f"Upstream {upstream!r} unavailable: {exc}")
        tasks = self._tasks
        result: dict[str, Any] = {
            "supportedVersions": list(mcp.MODERN_VERSIONS),
            "capabilities": tasks.capabilities(info.capabilities) if tasks else dict(info.capabilities),
            "_meta": {mcp.META_SERVER_INFO: dict(info.server_info)},
        }
        if info.instructions is not None:
            result["instructions"] = info.instructions
        line["outcome"] = "complete"
        return jsonrpc.Result(msg.id, complete(msg.method, result))

    async def _forward(
        self, upstream: str, req: ModernRequest, key: PoolKey, line: dict[str, Any]
    ) -> jsonrpc.Response:
        msg = req.request
        try:
            reply = await self._pools[upstream].request(key, msg.method, req.upstream_params, PLAIN_TIMEOUT)
        except UpstreamError as exc:
            line["outcome"] = "upstream_failed"
            return jsonrpc.error(msg.id, jsonrpc.UPSTREAM_FAILED, f"Upstream {upstream!r} failed: {exc}")
        if isinstance(reply, jsonrpc.Error):
            line["outcome"] = f"upstream_error:{reply.error.code}"
            return jsonrpc.Error(msg.id, reply.error)
        line["outcome"] = "complete"
        return jsonrpc.Result(msg.id, complete(msg.method, reply.result))

    def _pool_key(self, upstream: str, req: ModernRequest, request: web.Request, principal: str) -> PoolKey:
        names = self._upstreams[upstream].forward_headers
        forwarded = tuple((n, request.headers[n]) for n in names if n in request.headers)
        return PoolKey(req.capabilities, forwarded, principal)


async def read_body(request: web.Request, limit: int) -> bytes:
    """The whole body, or a 413 refusal as soon as it is known to exceed `limit` bytes. (A single
    `content.read(n)` returns whatever has arrived so far, which for a large body is only part of it.)"""
    too_large = Refusal(413, ErrorObject(jsonrpc.INVALID_REQUEST, "Request body too large"))
    if request.content_length is not None and request.content_length > limit:
        raise too_large
    body = bytearray()
    async for chunk in request.content.iter_chunked(64 * 1024):
        body += chunk
        if len(body) > limit:
            raise too_large
    return bytes(body)


def _host_name(host: str | None) -> str:
    """The Host header without its port, lowercased (`[::1]:8080` → `[::1]`)."""
    if not host:
        return ""
    if host.startswith("["):  # an IPv6 literal, with or without a port
        return host.split("]", 1)[0].lower() + "]"
    return host.split(":", 1)[0].lower()


def _meta_version(msg: jsonrpc.Message) -> object:
    if isinstance(msg, jsonrpc.Request | jsonrpc.Notification):
        meta = msg.params.get("_meta")
        if isinstance(meta, dict):
            return meta.get(mcp.META_PROTOCOL_VERSION)
    return None


def complete(method: str, result: Mapping[str, Any]) -> dict[str, Any]:
    """A legacy result as a 2026-07-28 one: `resultType`, and caching hints where the method has them."""
    out = {**result, "resultType": mcp.RESULT_COMPLETE}
    if method in mcp.CACHEABLE_METHODS:
        for name, value in mcp.DEFAULT_CACHE_HINT.items():
            out.setdefault(name, value)
    return out


def _joined(line: dict[str, Any], link: CallLink) -> dict[str, Any]:
    """The line with the call the request was for, if any: its id, and the request's round in it."""
    if link.call is not None:
        line["call"] = link.call
        line.setdefault("round", link.round)
    return line


def _is_unknown_method(answer: jsonrpc.Response) -> bool:
    return isinstance(answer, jsonrpc.Error) and answer.error.code == jsonrpc.METHOD_NOT_FOUND
