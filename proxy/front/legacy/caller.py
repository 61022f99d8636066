"""A legacy client's request as the legacy front (front.py) hands it to its job: what the endpoint parsed and
who sent it; and the plain HTTP error a legacy client is answered with before any upstream is asked."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

from aiohttp import web

from proxy.routes.policy import Grant
from proxy.routes.table import Route
from proxy.wire import jsonrpc


class Legacy(NamedTuple):
    """A legacy client's request, as the endpoint parsed it, and who sent it. (A named tuple: made for every
    request, in C.)"""

    request: web.Request
    upstream: str  # or an aggregated route's name (`route`)
    principal: str
    body: bytes | None
    msg: jsonrpc.Message | None
    forwarded: Sequence[tuple[str, str]]  # the client headers that go straight upstream
    gate: tuple[tuple[str, str], ...] | None  # validate mode's, for the modern front
    challenge: Callable[[str | None], str | None] | None
    route: Route | None
    grant: Grant | None


def error_response(status: int, message: str) -> web.Response:
    """An HTTP error with a JSON-RPC error body (no id: it answers the HTTP request, not a message)."""
    body = jsonrpc.dumps(jsonrpc.error(None, jsonrpc.INVALID_REQUEST, message))
    return web.Response(status=status, body=body, content_type="application/json")
