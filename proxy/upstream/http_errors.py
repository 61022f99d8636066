"""How the HTTP transports (streamable_http.py, http_sse.py; modern.py on aiohttp) turn HTTP failures into
UpstreamError.

Only failures the upstream certainly never processed become NotDelivered: a refused connection, and a 404
for a session the server no longer knows (it restarted). Both also end the session (`lose`). Each function
is called on the failure path only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Final

import aiohttp

from proxy.upstream.base import HttpRefused, NotDelivered, UpstreamAuthChallenge, UpstreamError
from proxy.upstream.lean_http import ConnectFailed
from proxy.upstream.response import UpstreamResponse
from proxy.wire import jsonrpc

SESSION_GONE: Final = "upstream no longer knows the session (HTTP 404)"
ENDED_UNANSWERED: Final = "upstream ended the stream before answering"  # a reply stream without the response


def invalid_message(exc: jsonrpc.InvalidMessage) -> UpstreamError:
    """A reply (its body, or an SSE event's data) that is not a JSON-RPC message."""
    return UpstreamError(f"upstream sent an invalid JSON-RPC message: {exc}")


def session_gone(lose: Callable[[str], object]) -> NotDelivered:
    """The upstream answered 404 for the session: it is gone, and the request was never processed."""
    lose(SESSION_GONE)
    return NotDelivered("upstream no longer knows the session (HTTP 404; did it restart?)")


async def refused(resp: UpstreamResponse) -> UpstreamError:
    """The upstream answered an HTTP error: HttpRefused with its status and the start of its body (an HTML
    page is named, not logged: its markup says nothing an operator needs). 401 and 403 refuse the forwarded
    credentials: UpstreamAuthChallenge, with the upstream's `WWW-Authenticate`."""
    if resp.status in (401, 403):
        return UpstreamAuthChallenge(resp.status, resp.headers.get("WWW-Authenticate"))
    if resp.content_type == "text/html":
        return HttpRefused(resp.status, f"upstream answered HTTP {resp.status} with an HTML page")
    body = (await resp.content.read(300)).decode(errors="replace")
    return HttpRefused(resp.status, f"upstream answered HTTP {resp.status}: {body}")


def unreachable(exc: aiohttp.ClientError, lose: Callable[[str], object]) -> UpstreamError:
    """The request could not be sent, or its answer not read. A connection that could not be made (before a
    byte was sent: aiohttp's or the lean client's) ends the session and is NotDelivered."""
    if isinstance(exc, aiohttp.ClientConnectorError | ConnectFailed):
        lose(f"could not connect to upstream: {exc}")
        return NotDelivered(f"could not connect to upstream: {type(exc).__name__}: {exc}")
    return UpstreamError(f"could not reach upstream: {type(exc).__name__}: {exc}")


def rejected_status(status: int, headers: Mapping[str, str] | None) -> UpstreamError | None:
    """A GET opened with `raise_for_status` that failed with `status`: the credentials refused (401/403),
    else None (the caller words its own error)."""
    if status in (401, 403):
        return UpstreamAuthChallenge(status, headers.get("WWW-Authenticate") if headers else None)
    return None


__all__ = ["SESSION_GONE", "refused", "rejected_status", "session_gone", "unreachable"]
