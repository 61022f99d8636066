"""A stateless 2026-07-28 client to one upstream: one POST per request, on the process's lean client
(lean_http.py: the native relay's and the mirror's requests) or on an aiohttp client (the era probe, `probe`).

No session and no handshake: every request carries `_meta` (the caller's, as the client sent it) and the
request metadata headers the Streamable HTTP binding requires (`MCP-Protocol-Version`, `Mcp-Method`,
`Mcp-Name`, base64-sentinel encoded when the value is not plain ASCII). The answer is one JSON object or an
SSE stream scoped to the request (decoded by wire/sse.py): its notifications (progress, log messages) go to
`on_note` as they come, its response ends it. Every read is bounded: the body's size, each event's size and
the whole answer's time.

An answer that is not a 2026-07-28 one (`modern_answer` judges it) raises `NotModern`: the era verdict
for the upstream no longer holds (it was replaced by a legacy server), and nothing was processed.

A connection that could not be made (the lean client's or aiohttp's) raises `NotDelivered` (nothing was
sent); anything after the request's bytes were written is an UpstreamError that says no such thing (the
request may have run, and is never sent again: calls/wording.relayed_failure words it so). The lean client
asks for `Accept-Encoding: identity` and refuses an answer with a Content-Encoding (an UpstreamError
beginning with lean_http.ENCODED): the proxy inflates nothing a modern upstream sends. On aiohttp (the era
probe) a gzip answer is inflated within max_message_bytes.
"""

from __future__ import annotations

import base64
import ssl
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

import aiohttp
import structlog
from aiohttp import hdrs
from multidict import CIMultiDict, istr
from yarl import URL

from proxy.config import MAX_MESSAGE_BYTES
from proxy.upstream.base import NotDelivered, UpstreamAuthChallenge, UpstreamError
from proxy.upstream.bounded import MessageTooLarge, read_body
from proxy.upstream.deadline import deadline
from proxy.upstream.http_errors import ENDED_UNANSWERED, unreachable
from proxy.upstream.keepalive import finish_body
from proxy.upstream.lean_http import ConnectFailed, ConnectTimeout, LeanClient
from proxy.upstream.propagation import propagated
from proxy.upstream.response import UpstreamResponse
from proxy.wire import jsonrpc, mcp
from proxy.wire.sse import SSEDecoder, SSEError

log = structlog.get_logger(__name__)

ACCEPT = "application/json, text/event-stream"
_SENTINEL = ("=?base64?", "?=")
_VERSION = istr("MCP-Protocol-Version")
_METHOD = istr("Mcp-Method")
_NAME = istr("Mcp-Name")
_SENT_AS = {hdrs.ACCEPT: ACCEPT, hdrs.CONTENT_TYPE: "application/json", _VERSION: mcp.MODERN_VERSION}

Notify = Callable[[jsonrpc.Notification], Awaitable[None]]
# The errors only a 2026-07-28 server answers with: HeaderMismatch, MissingRequiredClientCapability,
# UnsupportedProtocolVersion (basic_versioning.mdx, "Backward Compatibility").
MODERN_ERRORS = frozenset(
    {jsonrpc.HEADER_MISMATCH, jsonrpc.MISSING_CLIENT_CAPABILITY, jsonrpc.UNSUPPORTED_PROTOCOL_VERSION}
)


# The statuses a front proxy refuses a request with before any server sees it: bad request (nginx's "Request
# Header Or Cookie Too Large" is a 400), payload / URI / headers too large, nginx's own 494.
_REFUSED_REQUEST = frozenset({400, 413, 414, 431, 494})


class NotModern(UpstreamError):
    """The upstream answered a 2026-07-28 request the way a legacy server does (its status and the start of
    its body are the message): it did not process it. `refused_request`: the answer was no MCP answer at all
    but a refusal of the HTTP request itself (400, 413, 414, 431, 494 with no JSON-RPC body: what a front
    proxy such as nginx answers a header it will not pass on), which may be the request's headers' doing
    rather than the server's era (era.py then asks again without the client's)."""

    def __init__(self, message: str, *, refused_request: bool = False) -> None:
        super().__init__(message)
        self.refused_request = refused_request


@dataclass(frozen=True, slots=True)
class ModernTarget:
    """Where one upstream's 2026-07-28 requests go, and what every one of them carries."""

    url: str
    headers: Mapping[str, str] = field(default_factory=dict)  # the upstream's static ones (+ forwarded ones)
    timeout: float | None = (
        300.0  # the whole answer, the SSE stream's end included (None: subscriptions/listen)
    )
    max_message_bytes: int = MAX_MESSAGE_BYTES  # a JSON answer, or one SSE line or event (bounded.py)
    # On the lean client (an aiohttp client has its own): the upstream's SSL context (upstream/tls.py; None:
    # the system CAs) and how long a new connection may take (`upstreams[].timeouts.connect_s`).
    tls: ssl.SSLContext | None = None
    connect_timeout: float = 10.0
    # Made once per target, in the forms aiohttp takes as they are (a URL is not parsed again; a CIMultiDict
    # of `istr` names is not converted): `headers` with the ones every request sends over them. Never
    # changed: each request sends a copy (`post`).
    endpoint: URL = field(init=False, repr=False, compare=False)
    base_headers: CIMultiDict[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        base: CIMultiDict[str] = CIMultiDict({istr(name): value for name, value in self.headers.items()})
        base.update(_SENT_AS)
        object.__setattr__(self, "endpoint", URL(self.url))
        object.__setattr__(self, "base_headers", base)


def header_value(value: str) -> str:
    """`value` as a header value: as it is when it is plain visible ASCII, else the base64 sentinel form."""
    plain = value.isascii() and value.isprintable() and value == value.strip()
    if plain and not (value.startswith(_SENTINEL[0]) and value.endswith(_SENTINEL[1])):
        return value
    return _SENTINEL[0] + base64.b64encode(value.encode("utf-8", "surrogatepass")).decode() + _SENTINEL[1]


def metadata_headers(msg: jsonrpc.Request, version: str = mcp.MODERN_VERSION) -> dict[str, str]:
    """The standard request headers the body of `msg` calls for."""
    headers = {"MCP-Protocol-Version": version, "Mcp-Method": msg.method}
    if (name := _name_header(msg)) is not None:
        headers["Mcp-Name"] = name
    return headers


def _name_header(msg: jsonrpc.Request) -> str | None:
    """The `Mcp-Name` value of `msg` (None: its method names nothing, or its name is not a string)."""
    name_field = mcp.NAMED_METHODS.get(msg.method)
    name = msg.params.get(name_field) if name_field else None
    return header_value(name) if isinstance(name, str) else None


def modern_answer(status: int, answer: jsonrpc.Message | None, rid: jsonrpc.RequestId) -> bool:
    """Whether an HTTP answer to a 2026-07-28 request is a 2026-07-28 server's: a result (2xx), an error
    only a modern server gives, or an error to this very request (a legacy server's refusal of a request
    without a session names no request: `"id": "server-error"`, `null`, or no JSON-RPC at all)."""
    if isinstance(answer, jsonrpc.Result):
        return status < 300 and answer.id == rid
    if isinstance(answer, jsonrpc.Error):
        return answer.error.code in MODERN_ERRORS or (answer.id == rid and rid is not None)
    return False


async def post(
    http: aiohttp.ClientSession | LeanClient,
    target: ModernTarget,
    msg: jsonrpc.Request,
    *,
    on_note: Notify | None = None,
    extra_headers: Mapping[str, str] | None = None,
) -> jsonrpc.Response:
    """Send `msg` and return the upstream's response to it (its notifications go to `on_note` meanwhile).

    Raises UpstreamAuthChallenge (401/403), NotModern (a legacy server's answer), NotDelivered (no
    connection, nothing sent), UpstreamError (the upstream could not be reached, or answered nothing
    usable), TimeoutError (no answer in time)."""
    headers = target.base_headers.copy()
    if extra_headers:  # over the target's own, never over what says how the request is sent
        for name, value in extra_headers.items():
            headers[name] = value
        headers.update(_SENT_AS)
    for name, value in propagated().items():  # X-Request-Id, traceparent: over any of the same name
        headers[name] = value
    headers[_METHOD] = msg.method  # metadata_headers, into the copy
    if (named := _name_header(msg)) is not None:
        headers[_NAME] = named
    async with deadline(target.timeout):  # one timer per loop, not one per request (deadline.py)
        if isinstance(http, LeanClient):
            return await _post_lean(http, target, msg, headers, on_note)
        try:
            async with http.post(target.endpoint, data=jsonrpc.dumps(msg), headers=headers) as resp:
                return await _answer(resp, msg, on_note, target.max_message_bytes)
        except aiohttp.ClientError as exc:  # a connection not made: NotDelivered; later: UpstreamError
            raise unreachable(exc, _no_session) from None


def _no_session(_reason: str) -> None:
    """`unreachable`'s `lose`: a 2026-07-28 request has no session to end."""


async def _post_lean(
    lean: LeanClient,
    target: ModernTarget,
    msg: jsonrpc.Request,
    headers: CIMultiDict[str],
    on_note: Notify | None,
) -> jsonrpc.Response:
    """`post` on the lean client: the response is read to its end (its connection goes back to the pool)
    or closed (cancelled, e.g. a `subscriptions/listen` its client left, or failed: never pooled)."""
    try:
        resp = await lean.post(
            target.url,
            jsonrpc.dumps(msg),
            headers,
            tls=target.tls,
            connect_timeout=target.connect_timeout,
        )
    except (ConnectFailed, ConnectTimeout) as exc:
        raise NotDelivered(f"could not connect to upstream: {type(exc).__name__}: {exc}") from None
    except aiohttp.ClientError as exc:
        raise UpstreamError(f"could not reach upstream: {type(exc).__name__}: {exc}") from None
    try:
        return await _answer(resp, msg, on_note, target.max_message_bytes)
    except aiohttp.ClientError as exc:  # the lean client's errors while the body is read
        raise UpstreamError(f"could not reach upstream: {type(exc).__name__}: {exc}") from None
    finally:
        resp.close()  # nothing once the body ended (pooled already); else the connection is dropped


async def _answer(
    resp: UpstreamResponse, msg: jsonrpc.Request, on_note: Notify | None, limit: int
) -> jsonrpc.Response:
    if resp.status in (401, 403):
        raise UpstreamAuthChallenge(resp.status, resp.headers.get("WWW-Authenticate"))
    ctype = resp.headers.get(hdrs.CONTENT_TYPE, "")
    if resp.status < 300 and ctype.startswith("text/event-stream"):
        return await _read_stream(resp, msg, on_note, limit)
    body = await read_body(resp, limit)
    try:
        answer = jsonrpc.decode(body, keep=True) if body.strip() else None  # a result keeps its bytes
    except jsonrpc.InvalidMessage:
        answer = None
    if not modern_answer(resp.status, answer, msg.id):
        said = "an HTML page" if resp.content_type == "text/html" else body[:200].decode(errors="replace")
        refused = answer is None and resp.status in _REFUSED_REQUEST
        # an HTML page is named, not logged (http_errors)
        raise NotModern(f"HTTP {resp.status}: {said}", refused_request=refused)
    assert isinstance(answer, jsonrpc.Result | jsonrpc.Error)
    if answer.id != msg.id:  # a modern error without the request's id (e.g. a header check): it is ours
        return jsonrpc.Error(msg.id, answer.error) if isinstance(answer, jsonrpc.Error) else answer
    return answer


async def _read_stream(
    resp: UpstreamResponse, msg: jsonrpc.Request, on_note: Notify | None, limit: int
) -> jsonrpc.Response:
    decoder = SSEDecoder(max_event_bytes=limit)
    while chunk := await resp.content.readany():
        try:
            events = decoder.feed(chunk)
        except SSEError:
            resp.close()
            raise MessageTooLarge(limit) from None
        for event in events:
            if not event.data.strip():
                continue  # a priming or keep-alive event
            try:
                item = jsonrpc.decode(event.data.encode(), keep=True)  # the answer keeps its bytes
            except jsonrpc.InvalidMessage as exc:
                log.warning("upstream.bad_message", error=str(exc))
                continue
            if isinstance(item, jsonrpc.Result | jsonrpc.Error) and item.id == msg.id:
                await finish_body(resp)
                return item
            if isinstance(item, jsonrpc.Notification):
                if on_note is not None:
                    await on_note(item)
            else:  # a server request on a 2026-07-28 stream (the binding forbids it), or another's answer
                log.warning("upstream.unexpected_message", kind=type(item).__name__)
    raise UpstreamError(ENDED_UNANSWERED)


__all__ = [
    "MODERN_ERRORS",
    "ModernTarget",
    "NotModern",
    "Notify",
    "header_value",
    "metadata_headers",
    "modern_answer",
    "post",
]
