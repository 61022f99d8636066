"""The answers no room words itself: whatever aiohttp would answer in text/plain, as JSON-RPC.

An unknown route (404), a method a route does not take (405), and any other HTTP error raised on the way
(the peer port's refusals, `no upstream named …`) get a JSON-RPC error body, so every answer a client can
get parses as JSON (a bug's 500 too: `-32603`, its traceback in the log). And every 429 and 503 the proxy
sends carries `Retry-After` (1 s unless the answer set its own): a client or balancer always knows when to
try again.

A client that hangs up is not a bug: a write refused because its connection is gone is answered with a
response nobody receives (aiohttp drops it quietly), never logged as `request.unhandled`; the endpoint writes
such a request's canonical line itself (`outcome: client_gone`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

import structlog
from aiohttp import web

from proxy.wire import jsonrpc

log = structlog.get_logger("proxy.request")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
RETRY_AFTER_S = "1"
CLIENT_GONE_STATUS = 499  # a request whose client hung up first (nginx's "client closed request")
_ROUTES = "MCP is served at /mcp and /servers/<name>/mcp"
_DEFAULTS = {
    404: f"Not found ({_ROUTES})",
    405: "Method not allowed",
}


# A check made before the handler, in json_answers' own frame: an answer of its own (or an HTTPException
# raised), or None to go on to the handler. The app's front door folds its gates in here (the peer port,
# CORS preflights) rather than adding a middleware, a coroutine and an await per request, each.
Gate = Callable[[web.Request], web.StreamResponse | None]


class Watch(Protocol):
    """Told when each request's handling begins and ends, in json_answers' own frame (the listener's guard,
    process/listener.py: its deadlines), rather than as a middleware of its own."""

    def began(self, request: web.BaseRequest) -> object: ...

    def ended(self, token: object) -> None: ...


class JsonAnswers:
    """The `json_answers` middleware: its gates, and a `watch` that may be set before the app serves."""

    __middleware_version__ = 1  # a new-style middleware, as @web.middleware marks a function

    def __init__(self, gates: tuple[Gate, ...]) -> None:
        self._gates = gates
        self.watch: Watch | None = None

    async def __call__(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        watch = self.watch
        token = watch.began(request) if watch is not None else None
        try:
            early = None
            for gate in self._gates:
                early = gate(request)
                if early is not None:
                    break
            response = early if early is not None else await handler(request)
        except web.HTTPException as exc:
            if exc.status < 400:
                raise
            response = _as_json_rpc(exc)
        except Exception as exc:
            if isinstance(exc, ConnectionError) and client_gone(request):  # a hang-up, not a bug
                log.info("request.client_gone", path=request.path)
                return web.Response(status=CLIENT_GONE_STATUS)
            # a bug: still a JSON-RPC answer, and the traceback in the log
            log.exception("request.unhandled", path=request.path)
            body = jsonrpc.dumps(jsonrpc.error(None, jsonrpc.INTERNAL_ERROR, "Internal error"))
            response = web.Response(status=500, body=body, content_type="application/json")
        finally:
            if watch is not None and token is not None:
                watch.ended(token)
        if response.status in (429, 503) and "Retry-After" not in response.headers and not response.prepared:
            response.headers["Retry-After"] = RETRY_AFTER_S
        return response


def json_answers_with(*gates: Gate) -> JsonAnswers:
    """`json_answers` with `gates` checked first, in order, inside it (so their refusals are JSON-RPC too)."""
    return JsonAnswers(gates)


json_answers = json_answers_with()  # no gates


def client_gone(request: web.Request) -> bool:
    """Whether the client's connection is closed or closing: what a hang-up looks like from a handler (its
    task cancelled by aiohttp's handler_cancellation, or a write to its connection refused)."""
    transport = request.transport
    return transport is None or transport.is_closing()


def _as_json_rpc(exc: web.HTTPException) -> web.Response:
    default_text = f"{exc.status}: {exc.reason}"
    custom = exc.text if exc.text and exc.text != default_text else None
    message = custom or _DEFAULTS.get(exc.status, exc.reason)
    body = jsonrpc.dumps(jsonrpc.error(None, jsonrpc.INVALID_REQUEST, message))
    headers = {k: v for k, v in exc.headers.items() if k.lower() not in ("content-type", "content-length")}
    return web.Response(status=exc.status, body=body, content_type="application/json", headers=headers)
