"""The one MCP endpoint (`/mcp`, and `/servers/<name>/mcp`): it tells a legacy client from a modern one.

Every request gets its request id, its trace span and its one canonical log line here. The endpoint picks
the upstream, checks the Origin, reads and parses the body, and hands the request to its protocol's room:

- a legacy client (2024-11-05 … 2025-11-25: `initialize`, a response to a server request, or a session id
  without a modern `_meta` protocol version) goes to `front/legacy/` (the relay, or the bridge for `sse` and
  `stdio` upstreams);
- a modern (2026-07-28) request goes to `front/modern/` (checks, MRTR calls, tasks, listen).
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from collections.abc import Mapping

import structlog
from aiohttp import web
from structlog.contextvars import bind_contextvars

from proxy.calls.outcomes import CallLink
from proxy.config import FrontConfig, UpstreamConfig
from proxy.front.checks import Refusal, origin_allowed
from proxy.front.fallback import CLIENT_GONE_STATUS, client_gone
from proxy.front.legacy.front import LegacyFront, is_legacy
from proxy.front.loops import VIA, Hop
from proxy.front.modern.front import ModernFront
from proxy.front.oauth import AuthRefused, OAuthFront
from proxy.front.peers import FORWARD_PREFIX
from proxy.front.principal import Identity, PrincipalRefused, Resolver
from proxy.front.reply import json_response
from proxy.front.request_ids import REQUEST_ID_HEADER, request_id
from proxy.migration.tally import (
    ADAPTED,
    ASKED_KEY,
    MIRRORED,
    MIRRORED_KEY,
    PASSTHROUGH,
    RELAYED,
    MigrationBook,
)
from proxy.observe.line import Outcome, RequestLine
from proxy.observe.logs import info_line
from proxy.observe.metrics import record_request
from proxy.observe.spans import RequestSpan
from proxy.observe.tracing import Tracing
from proxy.routes.policy import Grant
from proxy.routes.table import Route
from proxy.upstream.propagation import propagating
from proxy.wire import jsonrpc, mcp
from proxy.wire.jsonrpc import ErrorObject

MAX_TOOL_NAME = 128  # characters of a tools/call's name the request line keeps

log = structlog.get_logger("proxy.request")
MODERN = frozenset(mcp.MODERN_VERSIONS)
NO_SESSION = (
    "Missing Mcp-Session-Id: a legacy client starts with initialize (a 2026-07-28 client sends "
    f"params._meta[{mcp.META_PROTOCOL_VERSION!r}] with every request)"
)
# The context variable structlog binds `request_id` in (`bind_contextvars` makes it once and keeps it), set
# and reset directly: its bind/reset build a dict and a name per request. Taken from a bind's token.
_REQUEST_ID = contextvars.Context().run(bind_contextvars, request_id=None)["request_id"].var


class Endpoint:
    def __init__(
        self,
        *,
        front: FrontConfig,
        upstreams: Mapping[str, UpstreamConfig],
        principal: Resolver,
        modern: ModernFront,
        legacy: LegacyFront,
        tracing: Tracing | None = None,  # None: no tracing (proxy/observe/tracing.py)
        oauth: OAuthFront | None = None,  # OAuth (front/oauth.py); None: no validation, no challenges
        migration: MigrationBook | None = None,  # calls by path (proxy/migration); None: not counted
    ) -> None:
        self._migration = migration
        self._oauth = oauth
        self._front = front
        self._upstreams = upstreams
        self._routes = modern.routes  # aggregated routes (proxy/routes/), served by the modern front
        self._by_host = {h.lower(): name for name, up in upstreams.items() for h in up.hosts} | {
            h.lower(): route.name for route in self._routes for h in route.hosts
        }
        alone = [name for name, up in upstreams.items() if up.standalone]  # the others: only in routes
        self._default = self._routes.default or next(iter(alone), None)
        self._principal = principal
        self._modern = modern
        self._legacy_front = legacy
        self._tracing = tracing or Tracing()
        self._origins = frozenset(front.allowed_origins)
        self._hop = Hop()  # this proxy's entry in the Via of its upstream requests (front/loops.py)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        started = time.perf_counter()
        rid = request_id(request.headers)
        span = self._tracing.start(request.headers)
        link = CallLink(span=span.ref)  # the call service says which call (and round) the request was
        line = RequestLine(rid, request.method, request.path)
        try:
            # Every log line, and every upstream HTTP request, made while handling it carries the request id.
            # (as structlog's bind_contextvars(request_id=rid) and its reset; see _REQUEST_ID)
            bound = _REQUEST_ID.set(rid)
            try:
                via = self._hop.via(_via(request))  # refuses a request that has been here before
                with propagating({REQUEST_ID_HEADER: rid, VIA: via, **span.headers}):
                    response = await self._handle(request, line, link)
            except Refusal as refusal:
                line.set_outcome(Outcome.REFUSED, refusal.error.code)
                response = json_response(jsonrpc.Error(line.json_id, refusal.error), refusal.status)
                response.headers.update(refusal.headers)
            except AuthRefused as refused:  # validate mode, or the upstream's 401/403 relayed
                if line.outcome is None:
                    line.set_outcome(Outcome.UNAUTHORIZED, refused.status)
                response = refused.response(line.json_id)
            finally:
                _REQUEST_ID.reset(bound)
        except web.HTTPException as exc:  # aiohttp answers with it (404: no such upstream)
            exc.headers[REQUEST_ID_HEADER] = rid
            _joined(line, link).status = exc.status
            span.finish(line, first_round=link.first_span)
            raise
        except (asyncio.CancelledError, ConnectionError) as exc:
            if not client_gone(request):  # cancelled by a shutdown, or a connection of ours: not the client
                span.finish(_joined(line, link), first_round=link.first_span, error=exc)
                raise
            self._written(request, gone(line), link, started, span=span, status=CLIENT_GONE_STATUS)
            if isinstance(exc, asyncio.CancelledError):
                raise  # handler_cancellation: the task ends here
            return web.Response(status=CLIENT_GONE_STATUS)  # never reaches anyone: aiohttp drops it
        except BaseException as exc:  # a bug
            span.finish(_joined(line, link), first_round=link.first_span, error=exc)
            raise
        self._written(request, line, link, started, span=span, status=response.status)
        if not response.prepared:  # one prepared while handling got it from echo_request_id
            response.headers[REQUEST_ID_HEADER] = rid
        return response

    def _written(
        self,
        request: web.Request,
        line: RequestLine,
        link: CallLink,
        started: float,
        *,
        span: RequestSpan,
        status: int,
    ) -> None:
        """The canonical line, its metrics and the span's end: once per request, whatever happened."""
        _joined(line, link)
        line.status = status
        line.duration_ms = round((time.perf_counter() - started) * 1000, 2)
        info_line(log, "request", line.render(), owned=True)
        record_request(request.app, line)  # the metrics, from the same line
        span.finish(line, first_round=link.first_span)

    async def _handle(self, request: web.Request, line: RequestLine, link: CallLink) -> web.StreamResponse:
        upstream = request.match_info.get("upstream") or (
            self._by_host.get(_host_name(request.host), self._default) if self._by_host else self._default
        )
        route = self._routes.get(upstream or "")
        up = self._upstreams.get(upstream or "")
        if upstream is None or (route is None and (up is None or not up.standalone)):
            raise web.HTTPNotFound(text=f"no upstream named {upstream!r}")
        line.upstream = upstream
        if route is not None:
            line.route = upstream  # the upstream a request goes to joins the line once it is known
        if not origin_allowed(request.headers.get("Origin"), request.host, self._origins):
            raise Refusal(403, ErrorObject(jsonrpc.INVALID_REQUEST, "Origin not allowed"))
        who = await self._identify(request, upstream, line)  # validate mode: no token, no further step
        if request.method in ("GET", "DELETE") and mcp.SESSION_HEADER in request.headers:
            return await self._legacy(request, upstream, None, None, line, who=who, route=route)
        if request.method != "POST":
            message = "2026-07-28 clients use POST only (GET and DELETE are for a legacy session)"
            raise Refusal(405, ErrorObject(jsonrpc.INVALID_REQUEST, message), (("Allow", "POST"),))
        body = await read_body(request, self._front.max_body_bytes)
        forwarded = request.path.startswith(FORWARD_PREFIX)
        if forwarded:  # the peer route: signed by a replica, or nothing is looked at
            self._modern.check_peer(request, body, line)
        try:
            msg = jsonrpc.decode(body)
        except jsonrpc.InvalidMessage as exc:
            line.id = exc.request_id
            raise Refusal(400, ErrorObject(exc.code, str(exc))) from None
        if forwarded and not isinstance(msg, jsonrpc.Request):
            raise Refusal(400, ErrorObject(jsonrpc.INVALID_REQUEST, "The peer route only takes retries"))
        if is_legacy(request, msg, _meta_version(msg)) and not forwarded:
            line.method = getattr(msg, "method", "response")
            line.id = getattr(msg, "id", None)
            _name_tool(line, msg)
            return await self._legacy(request, upstream, body, msg, line, who=who, route=route)
        if isinstance(msg, jsonrpc.Notification):
            line.method = msg.method
            line.set_outcome(Outcome.ACCEPTED)
            return web.Response(status=202)
        if not isinstance(msg, jsonrpc.Request):
            raise Refusal(400, ErrorObject(jsonrpc.INVALID_REQUEST, "Clients send requests, not responses"))
        line.id = msg.id
        line.method = msg.method
        _name_tool(line, msg)
        if _meta_version(msg) is None and request.headers.get("MCP-Protocol-Version") not in MODERN:
            line.era = "legacy"  # no session, nothing modern: a legacy client that lost its way
            raise Refusal(400, ErrorObject(jsonrpc.INVALID_REQUEST, NO_SESSION))
        response = await self._modern.handle(
            request,
            upstream,
            msg,
            body,
            line=line,
            link=link,
            principal=who.principal,
            upstream_headers=who.upstream_headers,
            route=route,
            grant=who.grant,
        )
        book = self._migration
        tool = line.tool
        if book is not None and tool is not None and "requestState" not in msg.params:  # a call, not a retry
            path = RELAYED if line.upstream_era == "modern" else ADAPTED
            asked = line.outcome is Outcome.INPUT_REQUIRED
            book.count(line.upstream or upstream, tool, path, asked, asked and path == ADAPTED)
        return response

    async def _identify(self, request: web.Request, upstream: str, line: RequestLine) -> Identity:
        """The principal and, in validate mode, the headers that go upstream for it. In validate mode a
        request without a valid token stops here (AuthRefused): no body read, no rate or call capacity
        taken. `principal.source: jwt_claim` refuses a header that is not a JWT."""
        admitted = await self._oauth.admit(request, upstream, line) if self._oauth is not None else None
        if admitted is not None:
            verified = admitted.verified
            return Identity(admitted.principal, admitted.forwarded, Grant(verified.scopes, verified.claims))
        try:
            return Identity(self._principal(request.headers), None, None)
        except PrincipalRefused:
            if self._oauth is None:
                raise Refusal(401, ErrorObject(jsonrpc.INVALID_REQUEST, "Unauthorized")) from None
            raise self._oauth.refused_principal(request, upstream, line) from None

    async def _legacy(
        self,
        request: web.Request,
        upstream: str,
        body: bytes | None,
        msg: jsonrpc.Message | None,
        line: RequestLine,
        *,
        who: Identity,
        route: Route | None,
    ) -> web.StreamResponse:
        """A legacy client's request: relayed to its upstream's session, or (a modern upstream, an
        aggregated `route`) served by the mirror (front/legacy/mirror/front.py)."""
        line.era = "legacy"
        oauth = self._oauth

        def challenge(raw: str | None) -> str | None:
            return oauth.relayed_header(request, upstream, raw) if oauth is not None else raw

        self._modern.rate.check(who.principal)  # legacy clients share the per-principal rate (429)
        response = await self._legacy_front.handle(
            request,
            upstream,
            who.principal,
            body,
            msg,
            forwarded=who.upstream_headers,
            challenge=challenge,
            route=route,
            grant=who.grant,
        )
        gone_get = request.method == "GET" and client_gone(request)  # a GET stream its client ended
        if gone_get:
            line.set_outcome(Outcome.CLIENT_CLOSED)
        else:
            line.set_outcome(Outcome.RELAYED, response.status)
        book = self._migration
        if book is not None and isinstance(msg, jsonrpc.Request):
            _count_legacy(book, request, line, msg)
        return response


async def read_body(request: web.Request, limit: int) -> bytes:
    """The whole body, or a 413 refusal as soon as it is known to exceed `limit` bytes. (A single
    `content.read(n)` returns whatever has arrived so far, which for a large body is only part of it.)"""
    length = request.content_length
    if length is not None:
        if length > limit:
            raise _too_large()
        try:  # one read (the parser stops at Content-Length), not an async iteration over chunks
            return await request.content.readexactly(length)
        except asyncio.IncompleteReadError as short:  # the client stopped early: what came, as before
            return short.partial
    body = bytearray()
    async for chunk in request.content.iter_chunked(64 * 1024):
        body += chunk
        if len(body) > limit:
            raise _too_large()
    return bytes(body)


def _too_large() -> Refusal:  # made when refused, not for every request read
    return Refusal(413, ErrorObject(jsonrpc.INVALID_REQUEST, "Request body too large"))


def _host_name(host: str | None) -> str:
    """The Host header without its port, lowercased (`[::1]:8080` → `[::1]`)."""
    if not host:
        return ""
    if host.startswith("["):  # an IPv6 literal, with or without a port
        return host.split("]", 1)[0].lower() + "]"
    return host.split(":", 1)[0].lower()


def _name_tool(line: RequestLine, msg: jsonrpc.Message) -> None:
    """A `tools/call`'s line names its tool (cut to MAX_TOOL_NAME characters: the client chose it)."""
    if isinstance(msg, jsonrpc.Request) and msg.method == "tools/call":
        name = msg.params.get("name")
        if isinstance(name, str):
            line.tool = name[:MAX_TOOL_NAME]


def _count_legacy(book: MigrationBook, request: web.Request, line: RequestLine, msg: jsonrpc.Request) -> None:
    """A legacy client's call (mirrored if the mirror marked the request, else passed through), or its
    `initialize` (the client's name, for the verdict's evidence)."""
    if line.tool is not None:
        mirrored = request.get(MIRRORED_KEY)
        asked = request.get(ASKED_KEY) is True
        path = PASSTHROUGH if mirrored is None else MIRRORED
        book.count(line.upstream or "", line.tool, path, asked, asked and mirrored == "inline")
    elif msg.method == "initialize":
        info = msg.params.get("clientInfo")
        book.client(line.upstream or "", info.get("name") if isinstance(info, dict) else None)


def _meta_version(msg: jsonrpc.Message) -> object:
    if isinstance(msg, jsonrpc.Request | jsonrpc.Notification):
        meta = msg.params.get("_meta")
        if isinstance(meta, dict):
            return meta.get(mcp.META_PROTOCOL_VERSION)
    return None


def gone(line: RequestLine) -> RequestLine:
    """The line of a request whose client hung up before its answer was written: outcome `client_gone`.
    A stream the client ends is its ordinary end, `client_closed`: a listen stream, a legacy session's GET
    stream. An outcome decided but never delivered is kept as `unsent` (the answer the client did not get:
    a call's result, an input_required round)."""
    outcome = line.outcome_text
    if line.outcome is Outcome.CLIENT_CLOSED or line.http_method == "GET":
        line.set_outcome(Outcome.CLIENT_CLOSED)
        return line
    if outcome is not None:
        line.unsent = outcome
    line.set_outcome(Outcome.CLIENT_GONE)
    return line


def _joined(line: RequestLine, link: CallLink) -> RequestLine:
    """The line with the call the request was for, if any: its id, and the request's round in it."""
    if link.call is not None:
        line.call = link.call
        if line.round is None:
            line.round = link.round
    return line


def _via(request: web.Request) -> str | None:
    """The request's Via header lines as one list (None: none)."""
    first = request.headers.get(VIA)
    if first is None:
        return None
    lines = request.headers.getall(VIA)
    return first if len(lines) == 1 else ", ".join(lines)
