"""A legacy HTTP+SSE session (the 2024-11-05 transport) to one upstream server.

`GET <sse url>` opens the one stream of the session; its first event, `endpoint`, names the URL every client
message is POSTed to (the server answers `202`; responses and server requests all come on the stream). The
endpoint is resolved against the SSE URL and must be on the same origin. Routing and the `initialize`
negotiation are shared with the other transports (`router.py`). No `Mcp-Session-Id`/`MCP-Protocol-Version`
headers: this transport has neither.

The stream is read with aiohttp-sse-client, whose `EventSource` reconnects by itself when a stream ends
(in `__anext__`: `on_error()`, sleep, `connect()` — a new `GET` with `Last-Event-Id`). On this transport a
new GET is a *new* session with a new endpoint: the old session, and any call running on it, is gone. So the
library's reconnection is disabled (`_SingleStream`) and the stream ending is the session's death: every
waiter fails and the receiving call gets `TransportLost`. Nothing is ever re-sent.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Mapping
from datetime import timedelta

import aiohttp
import structlog
from aiohttp.http_exceptions import LineTooLong
from aiohttp_sse_client.client import READY_STATE_CONNECTING, EventSource
from yarl import URL

from proxy.upstream.base import Inbox, NotDelivered, UpstreamError
from proxy.upstream.bounded import MessageTooLarge
from proxy.upstream.http_errors import refused, rejected_status, session_gone, unreachable
from proxy.upstream.http_settings import SessionSettings
from proxy.upstream.keepalive import finish_body
from proxy.upstream.propagation import detach_from_request, with_propagated
from proxy.upstream.router import NoCallAnswer, negotiate
from proxy.upstream.session_core import SessionCore
from proxy.wire import jsonrpc, mcp

log = structlog.get_logger(__name__)

POST_TIMEOUT = 30.0  # a POST is only accepted (202) here; its answer comes on the stream
LOST_REASON = "the upstream's SSE stream ended; a 2024-11-05 session cannot be resumed"


class _StreamEnded(Exception):
    """Raised inside aiohttp-sse-client where it would reconnect."""


class _SingleStream(EventSource):  # type: ignore[misc]  # untyped library
    """`EventSource` for exactly one `GET`: where the library would reconnect, it raises `_StreamEnded`.

    aiohttp-sse-client 0.2.1, when the response body ends, sets `ready_state` to CONNECTING, calls
    `on_error()`, sleeps `reconnection_time * 2` (the server may change it with `retry:`) and calls
    `connect()` again. `on_error` raising stops that before the sleep; `connect` refusing a second call is the
    backstop. `max_connect_retry=0`: a refused first connect fails at once (no 10 s backoff). The response is
    opened with `raise_for_status`, so an HTTP error is released by aiohttp and surfaces with its status.

    Bounded by `max_message_bytes`: aiohttp refuses a line longer than twice the read buffer (LineTooLong),
    and an event's `data:` lines, which the library would join without limit, raise MessageTooLarge."""

    def __init__(
        self,
        url: str,
        http: aiohttp.ClientSession,
        headers: Mapping[str, str],
        connect_timeout: float,
        max_message_bytes: int,
    ) -> None:
        super().__init__(
            url,
            session=http,
            reconnection_time=timedelta(0),
            max_connect_retry=0,
            on_error=self._refuse_reconnect,
            headers=dict(headers),
            raise_for_status=True,
            read_bufsize=max(1, max_message_bytes // 2),
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=connect_timeout),
        )
        self._connects = 0
        self.connect_timeout = connect_timeout
        self.max_message_bytes = max_message_bytes

    def _process_field(self, field_name: str, field_value: str) -> None:
        held: str = getattr(self, "_event_data", "")  # the library's buffer of this event's data lines
        if field_name == "data" and len(held) + len(field_value) >= self.max_message_bytes:
            self._event_data = ""
            raise MessageTooLarge(self.max_message_bytes)
        super()._process_field(field_name, field_value)

    async def connect(self, retry: int = 0) -> None:
        self._connects += 1
        if self._connects > 1:
            raise _StreamEnded("refusing to reconnect")
        await super().connect(retry)

    def _refuse_reconnect(self) -> None:
        if self._connects and self.ready_state == READY_STATE_CONNECTING:
            raise _StreamEnded("the stream ended")


def resolve_endpoint(sse_url: str, data: str) -> str:
    """The absolute POST URL an `endpoint` event's data names, resolved against the SSE URL.

    Raises UpstreamError when it is empty, carries credentials, or is on another origin (scheme, host, port)
    than the SSE URL: the proxy would otherwise send its clients' messages and forwarded headers there."""
    reference = data.strip()
    if not reference:
        raise UpstreamError("upstream sent an empty endpoint event")
    base = URL(sse_url)
    try:
        target = base.join(URL(reference)).with_fragment(None)
    except ValueError as exc:
        raise UpstreamError(f"upstream sent an unusable endpoint ({exc})") from None
    if not target.is_absolute() or _origin(target) != _origin(base):
        raise UpstreamError(
            f"upstream named an endpoint on another origin ({_shown_origin(target)}, "
            f"not {_shown_origin(base)}); refused"
        )
    if target.user is not None or target.password is not None:
        raise UpstreamError("upstream named an endpoint carrying credentials; refused")
    return str(target)


def _origin(url: URL) -> tuple[str, str, int | None]:
    return (url.scheme.lower(), (url.host or "").lower(), url.port)


def _shown_origin(url: URL) -> str:
    if not url.is_absolute():
        return repr(str(url)[:60])
    return f"{url.scheme}://{url.host}:{url.port}"


async def _endpoint_of(stream: _SingleStream, url: str, timeout: float) -> str:
    """Connect `stream` and wait (within the smaller of `timeout` and its connect timeout) for its
    `endpoint` event: the POST URL, resolved and checked. Raises UpstreamError (UpstreamAuthChallenge)."""
    bound = min(timeout, stream.connect_timeout)
    try:
        async with asyncio.timeout(bound):  # connecting ends with the endpoint event
            await stream.connect()
            while (event := await stream.__anext__()).type != "endpoint":
                log.warning("upstream.sse_event_before_endpoint", event_type=event.type)
    except TimeoutError:
        raise UpstreamError(
            f"upstream sent no endpoint event within {bound:g}s (timeouts.connect_s)"
        ) from None
    except aiohttp.ClientResponseError as exc:
        challenge = rejected_status(exc.status, exc.headers)
        raise challenge or UpstreamError(f"GET {url} answered HTTP {exc.status}") from None
    except LineTooLong:
        raise MessageTooLarge(stream.max_message_bytes) from None
    except (aiohttp.ClientError, OSError) as exc:
        raise UpstreamError(f"could not open the SSE stream: {type(exc).__name__}: {exc}") from None
    except (_StreamEnded, StopAsyncIteration):
        raise UpstreamError("upstream ended the SSE stream before sending its endpoint") from None
    return resolve_endpoint(url, str(event.data))


async def serves_http_sse(
    http: aiohttp.ClientSession,
    url: str,
    headers: Mapping[str, str],
    timeout: float,
    max_message_bytes: int,
) -> bool:
    """Does `url` answer a GET the way a 2024-11-05 HTTP+SSE server does: an event stream whose first
    event is `endpoint`, on the same origin? The rule `mrtr-proxy probe` applies after a Streamable HTTP
    POST was refused, run with this transport's own opener; the stream (a session on the server) is closed
    at once."""
    stream = _SingleStream(url, http, headers, timeout, max_message_bytes)
    try:
        await _endpoint_of(stream, url, timeout)
    except UpstreamError:
        return False
    finally:
        await stream.close()
    return True


class HttpSseSession(SessionCore):
    """Implements `UpstreamSession` over the 2024-11-05 HTTP+SSE transport."""

    def __init__(self, http: aiohttp.ClientSession, settings: SessionSettings, no_call: NoCallAnswer) -> None:
        super().__init__(no_call)
        self._http = http
        self._settings = settings
        # The wire has no session id; the endpoint URL is a bearer capability, so it is never used as one
        # (session ids go to logs and into sealed handles). A local name stands in.
        self._session_id = "sse-" + secrets.token_hex(8)
        self._endpoint: str | None = None
        self._stream: _SingleStream | None = None

    # -- lifecycle ----------------------------------------------------------------------------------------

    async def open(self) -> None:
        """Open the stream, wait (bounded) for its `endpoint` event, then initialize over it."""
        timeout = self._settings.initialize_timeout
        self._stream = _SingleStream(
            self._settings.url,
            self._http,
            self._settings.headers,
            self._settings.connect_timeout,
            self._settings.max_message_bytes,
        )
        self._endpoint = await _endpoint_of(self._stream, self._settings.url, timeout)
        self._spawn(self._read_stream(self._stream))
        self._info = await negotiate(
            self._exchange, self._settings.versions, self._settings.capabilities, timeout
        )
        self._alive = self._lost is None
        await self.send(jsonrpc.Notification(mcp.INITIALIZED, {}))

    async def close(self) -> None:
        self._alive = False
        self._lost = self._lost or "session closed"  # nothing is POSTed after this
        self._router.fail_all("session closed")
        await self._cancel_tasks()
        if self._stream is not None:
            await self._stream.close()  # closing the GET ends the session on the server

    # -- UpstreamSession ----------------------------------------------------------------------------------

    async def resume_call(self, inbox: Inbox, request_id: jsonrpc.RequestId, last_event_id: str) -> None:
        """Never possible here: the session's one stream belongs to the process that opened it, and a new
        GET is a new session (events carry no ids to resume from either)."""
        raise UpstreamError("a 2024-11-05 HTTP+SSE session cannot be taken over: its stream is not resumable")

    async def send(self, message: jsonrpc.Response | jsonrpc.Notification) -> None:
        await self._deliver(message)

    # -- internals ----------------------------------------------------------------------------------------

    async def _deliver(self, message: jsonrpc.Message) -> None:
        """POST one message to the endpoint. Only its acceptance is known here; answers come on the stream.

        Raises NotDelivered when the upstream certainly never processed it (the session was already dead so
        nothing was sent, the connection was refused, or the server no longer knows the session)."""
        if self._lost is not None:
            raise NotDelivered(self._lost)
        if self._endpoint is None:
            raise NotDelivered("session not open")
        headers = {**with_propagated(self._settings.headers), "Content-Type": "application/json"}
        try:
            async with self._http.post(
                self._endpoint,
                data=jsonrpc.dumps(message),
                headers=headers,
                timeout=aiohttp.ClientTimeout(
                    total=POST_TIMEOUT, sock_connect=self._settings.connect_timeout
                ),
            ) as resp:
                if resp.status == 404:
                    raise session_gone(self._lose_stream)
                if resp.status >= 400:
                    raise await refused(resp)
                await finish_body(resp)  # its "Accepted": read, so the connection is reused
        except aiohttp.ClientError as exc:
            raise unreachable(exc, self._lose_stream) from None
        except TimeoutError:
            raise UpstreamError(f"upstream did not accept a message within {POST_TIMEOUT:g}s") from None

    async def _read_stream(self, stream: _SingleStream) -> None:
        """Dispatch every message on the stream; when it ends, for whatever reason, the session is dead."""
        detach_from_request()  # the stream is the session's, not the request's that opened it
        error, too_large = None, False
        try:
            async for event in stream:
                self._on_event(event.type, event.data)
                await self._until_answered()  # a server flooding us with requests waits for their answers
        except _StreamEnded:
            pass
        except (MessageTooLarge, LineTooLong):
            too_large = True
        except Exception as exc:  # a broken connection, bad UTF-8: all end the session
            error = f"{type(exc).__name__}: {exc}"
        if too_large:  # the connection is closed: what was read of the message is dropped, no more is read
            self._lose_stream(str(MessageTooLarge(self._settings.max_message_bytes)))
            await stream.close()
        else:
            self._lose_stream(LOST_REASON, error)

    def _on_event(self, event_type: str | None, data: str) -> None:
        if event_type not in (None, "message"):
            log.warning("upstream.sse_unexpected_event", event_type=event_type)  # e.g. a second `endpoint`
            return
        try:
            msg = jsonrpc.decode(data)
        except jsonrpc.InvalidMessage as exc:
            log.warning("upstream.bad_message", error=str(exc))
            return
        self._dispatch_one_stream(msg)  # one stream carries everything

    def _lose_stream(self, reason: str, error: str | None = None) -> None:
        if self._lose(reason):
            log.warning("upstream.sse_session_lost", session=self._session_id, reason=reason, error=error)


__all__ = ["HttpSseSession", "resolve_endpoint"]
