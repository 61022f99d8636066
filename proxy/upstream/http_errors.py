"""How the HTTP transports (streamable_http.py, http_sse.py; modern.py on aiohttp) turn HTTP failures into
UpstreamError.

Only failures the upstream certainly never processed become NotDelivered: a refused connection, and an
answer saying the server no longer knows the session (it restarted): a 404 (the spec's), or a 400 whose body
says so, as real servers do (`forgotten_session`). Both also end the session (`lose`). Each function is
called on the failure path only.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Final

import aiohttp

from proxy.upstream.base import HttpRefused, NotDelivered, UpstreamAuthChallenge, UpstreamError
from proxy.upstream.lean_http import ConnectFailed
from proxy.upstream.response import UpstreamResponse
from proxy.wire import jsonrpc

SESSION_GONE: Final = "upstream no longer knows the session (HTTP 404)"
ENDED_UNANSWERED: Final = "upstream ended the stream before answering"  # a reply stream without the response


# What real servers say of a session they do not know, in a 400 or 404 body: the TypeScript SDK v1's
# examples and server-everything (400 "Bad Request: No valid session ID provided"), its transport (404
# "Session not found"), the mcp Python SDK / FastMCP 1.x-4.x (404 "Session not found", "Not Found: Invalid or
# expired session ID").
_FORGOTTEN = re.compile(
    rb"no valid session|session not found|invalid or expired session|unknown session|session (id )?expired",
    re.IGNORECASE,
)


def forgotten_session(status: int, body: bytes) -> bool:
    """An HTTP answer to a request on a session that says the server does not know that session: any 404
    (what the spec asks for), or a 400 in the words of a server that uses 400 for it."""
    return status == 404 or (status == 400 and _FORGOTTEN.search(body) is not None)


async def refused_or_gone(resp: UpstreamResponse, lose: Callable[[str], object]) -> UpstreamError:
    """`refused`, unless the answer (to a request on a session) says the session is forgotten: then the
    session ends and the request certainly never ran (NotDelivered: it may be sent on a new session)."""
    if resp.status == 400 and resp.content_type != "text/html":
        body = await resp.content.read(300)
        if forgotten_session(400, body):
            return session_gone(lose, 400)
        return HttpRefused(400, f"upstream answered HTTP 400: {body.decode(errors='replace')}")
    if resp.status == 404:
        return session_gone(lose)
    return await refused(resp)


def invalid_message(exc: jsonrpc.InvalidMessage) -> UpstreamError:
    """A reply (its body, or an SSE event's data) that is not a JSON-RPC message."""
    return UpstreamError(f"upstream sent an invalid JSON-RPC message: {exc}")


def session_gone(lose: Callable[[str], object], status: int = 404) -> NotDelivered:
    """The upstream answered 404 (or a 400 saying so) for the session: it is gone, and the request was
    never processed."""
    lose(f"upstream no longer knows the session (HTTP {status})")
    return NotDelivered(f"upstream no longer knows the session (HTTP {status}; did it restart?)")


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


__all__ = [
    "SESSION_GONE",
    "forgotten_session",
    "refused",
    "refused_or_gone",
    "rejected_status",
    "session_gone",
    "unreachable",
]
