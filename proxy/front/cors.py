"""CORS for the MCP routes (`/mcp`, `/servers/<name>/mcp`), for the origins in `front.allowed_origins`.

A page on an allowed origin may call the proxy from a browser:

- its preflight (`OPTIONS` with `Origin`) is answered 204 with the methods and the MCP request headers
  allowed, cached for `MAX_AGE_S`;
- every answer to it (results, JSON-RPC errors, 401 challenges, SSE streams, a 404 for an unknown
  upstream) names that origin in `Access-Control-Allow-Origin`, with `Vary: Origin`, and exposes the
  headers a client reads (`Mcp-Session-Id`, `WWW-Authenticate`, `Retry-After`, `X-Request-Id`).

Any other cross-origin page gets nothing: its preflight is refused 403 with a JSON-RPC error (logged like
every request), and no `Access-Control-*` header is ever sent to it, so the browser keeps the answer from
the page. The endpoint refuses its requests as before (403, "Origin not allowed"). No credentials mode:
cookies are never used; a token goes in `Authorization`, which a page sets itself.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

import structlog
from aiohttp import web

from proxy.front.checks import origin_allowed
from proxy.front.reply import json_response
from proxy.front.request_ids import REQUEST_ID_HEADER, request_id
from proxy.observe.line import Outcome, RequestLine
from proxy.observe.logs import info_line
from proxy.observe.metrics import record_request
from proxy.wire import jsonrpc
from proxy.wire.jsonrpc import ErrorObject

ALLOW_METHODS = "POST, GET, DELETE, OPTIONS"
ALLOW_HEADERS = (
    "Content-Type",
    "Accept",
    "Authorization",
    "Mcp-Session-Id",
    "Mcp-Method",
    "Mcp-Name",
    "MCP-Protocol-Version",
    "Last-Event-ID",
    REQUEST_ID_HEADER,
    "traceparent",
    "tracestate",
)
EXPOSE_HEADERS = ("Mcp-Session-Id", "WWW-Authenticate", "Retry-After", REQUEST_ID_HEADER)
_ALLOW_HEADERS_VALUE = ", ".join(ALLOW_HEADERS)  # joined once: sent on every preflight
_EXPOSE_HEADERS_VALUE = ", ".join(EXPOSE_HEADERS)  # and this on every answer to an allowed origin
MAX_AGE_S = 600  # how long a browser may reuse a preflight's answer
MAX_LOGGED_ORIGIN = 200  # characters of a refused Origin the request line keeps

log = structlog.get_logger("proxy.request")


def is_mcp_path(path: str) -> bool:
    """`/mcp` or `/servers/<name>/mcp` (not the peer routes under /_mrtr/, not the probes)."""
    if path == "/mcp":
        return True
    parts = path.split("/")
    return len(parts) == 4 and parts[1] == "servers" and parts[2] != "" and parts[3] == "mcp"


class Cors:
    """What a browser on `allowed` origins is told, and the refusal for the others."""

    def __init__(self, allowed: Iterable[str]) -> None:
        self._allowed = frozenset(allowed)

    def granted(self, request: web.Request) -> str | None:
        """The request's Origin if it is an allowed one (the value to send back), else None."""
        origin = request.headers.get("Origin")
        return origin if origin is not None and origin in self._allowed else None

    def preflight(self, request: web.Request) -> web.Response:
        """The answer to `OPTIONS` on an MCP route."""
        started = time.perf_counter()
        rid = request_id(request.headers)
        origin = request.headers.get("Origin")
        line = RequestLine(rid, "OPTIONS", request.path)
        if origin is not None and not origin_allowed(origin, request.host, self._allowed):
            line.set_outcome(Outcome.REFUSED, jsonrpc.INVALID_REQUEST)
            line.origin = origin[:MAX_LOGGED_ORIGIN]
            response = json_response(
                jsonrpc.Error(None, ErrorObject(jsonrpc.INVALID_REQUEST, "Origin not allowed")), 403
            )
        else:  # allowed, a same-origin loopback page, or no Origin at all (not a browser's preflight)
            line.set_outcome(Outcome.PREFLIGHT)
            response = web.Response(status=204, headers={"Allow": ALLOW_METHODS})
            if self.granted(request) is not None:
                response.headers.update(
                    {
                        "Access-Control-Allow-Methods": ALLOW_METHODS,
                        "Access-Control-Allow-Headers": _ALLOW_HEADERS_VALUE,
                        "Access-Control-Max-Age": str(MAX_AGE_S),
                    }
                )
        response.headers[REQUEST_ID_HEADER] = rid
        line.status = response.status
        line.duration_ms = round((time.perf_counter() - started) * 1000, 2)
        info_line(log, "request", line.render(), owned=True)
        record_request(request.app, line)
        return response

    def on_prepare(self, request: web.Request, response: web.StreamResponse) -> None:
        """At `on_response_prepare` (process/app.py): the CORS headers of every answer on an MCP route, and
        for a request with an Origin that is not allowed, no `Access-Control-*` header at all (whoever set
        one)."""
        if not is_mcp_path(request.path) or "Origin" not in request.headers:
            return
        _vary_origin(response)
        origin = self.granted(request)
        if origin is None:
            for name in [n for n in response.headers if n.lower().startswith("access-control-")]:
                del response.headers[name]
            return
        response.headers["Access-Control-Allow-Origin"] = origin
        if request.method != "OPTIONS":
            response.headers["Access-Control-Expose-Headers"] = _EXPOSE_HEADERS_VALUE


def preflight_gate(cors: Cors) -> Callable[[web.Request], web.Response | None]:
    """Answers `OPTIONS` on the MCP routes before the endpoint sees it (which takes POST, GET, DELETE): a
    gate of the app's outermost middleware (front/fallback.py's `json_answers_with`), not a middleware of
    its own, so other requests pay one comparison for it rather than a coroutine hop."""

    def preflight(request: web.Request) -> web.Response | None:
        if request.method == "OPTIONS" and is_mcp_path(request.path):
            return cors.preflight(request)
        return None

    return preflight


def _vary_origin(response: web.StreamResponse) -> None:
    vary = response.headers.get("Vary")
    if vary is None:
        response.headers["Vary"] = "Origin"
    elif "origin" not in {v.strip().lower() for v in vary.split(",")}:
        response.headers["Vary"] = f"{vary}, Origin"
