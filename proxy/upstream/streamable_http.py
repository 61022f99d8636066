"""A legacy Streamable HTTP session (protocol 2025-03-26 … 2025-11-25) to one upstream server.

`initialize` → `notifications/initialized` → a standalone GET stream held open; every POST carries
`Mcp-Session-Id` and `MCP-Protocol-Version`; replies come as JSON or SSE (parsed with our own decoder).
Every server request, on whichever stream it arrives, goes to the one receiving call's inbox; responses go to
their waiter by id (routing and `initialize` negotiation live in `router.py`, shared with the other
transports). `DELETE` on close.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import secrets
from collections.abc import Callable

import aiohttp
import structlog

from proxy.upstream.base import Inbox, ServerInfo, TransportLost, UpstreamError
from proxy.upstream.bounded import MessageTooLarge, read_body
from proxy.upstream.event_stream import EventStream, StreamEnded, StreamPosition, open_event_stream, settle
from proxy.upstream.http_errors import SESSION_GONE, refused, rejected_status, session_gone, unreachable
from proxy.upstream.http_settings import SessionSettings
from proxy.upstream.keepalive import finish_body, finish_later, leave
from proxy.upstream.lean_http import LeanClient
from proxy.upstream.propagation import detach_from_request, forget_propagated, header_name, with_propagated
from proxy.upstream.response import UpstreamResponse
from proxy.upstream.router import CLIENT_INFO, NoCallAnswer, negotiate
from proxy.upstream.session_core import CALLBACK_CONTEXT, SessionCore
from proxy.upstream.tls import context_of
from proxy.wire import jsonrpc, mcp
from proxy.wire.sse import SSEDecoder, SSEError, SSEEvent

log = structlog.get_logger(__name__)

ACCEPT = "application/json, text/event-stream"
GET_RETRY_DELAYS = (0.1, 0.5, 1.0, 2.0, 5.0)
# A resumed call stream is re-opened (with the newest Last-Event-ID) after this long without its answer:
# some servers replay on a resumed GET but never attach live delivery to it (server-everything's example
# event store), so new events only arrive by asking again.
RESUME_WINDOW = 2.0


class StreamableHttpSession(SessionCore):
    """`UpstreamSession` over legacy Streamable HTTP: POSTs on the pooled `lean` client (lean_http.py; None:
    one of its own, closed with the session), the rest on aiohttp's `http`, both with `http`'s SSL context."""

    def __init__(
        self,
        http: aiohttp.ClientSession,
        settings: SessionSettings,
        no_call: NoCallAnswer,
        lean: LeanClient | None = None,
    ) -> None:
        # Ids unique across sessions and replicas: a resumed stream on a server whose event store replays
        # more than that stream must not be able to pass another session's response off as the call's.
        super().__init__(no_call, first_id=secrets.randbelow(2**50) + 1)
        self._http, self._tls, self._settings = http, context_of(http), settings
        self._lean, self._own_lean = (lean, False) if lean is not None else (LeanClient(), True)
        self._call_event_id: str | None = None  # last SSE event id on the receiving call's POST stream
        self._get_stream: EventStream | None = None  # the standalone stream, while it is up

    @property
    def last_event_id(self) -> str | None:
        """The last SSE event id seen on the receiving call's stream (to resume it with Last-Event-ID)."""
        return self._call_event_id

    # -- lifecycle ----------------------------------------------------------------------------------------

    async def open(self) -> None:
        """Initialize, negotiating the newest legacy version both sides speak, and open the GET stream."""
        self._info = await negotiate(
            self._exchange,
            self._settings.versions,
            self._settings.capabilities,
            self._settings.initialize_timeout,
        )
        self._alive = True
        await self.send(jsonrpc.Notification(mcp.INITIALIZED, {}))
        await self._open_get_stream()

    @classmethod
    async def adopt(
        cls,
        http: aiohttp.ClientSession,
        settings: SessionSettings,
        no_call: NoCallAnswer,
        session_id: str,
        info: ServerInfo,
        *,
        lean: LeanClient | None = None,
    ) -> StreamableHttpSession:
        """Attach to legacy session `session_id`, opened by another replica (no initialize), with the
        upstream's negotiated `info`, and hold a standalone GET stream of our own on it."""
        session = cls(http, settings, no_call, lean)
        session._session_id, session._info, session._alive = session_id, info, True
        await session._open_get_stream()
        return session

    async def _open_get_stream(self) -> None:
        get_ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._spawn(self._run_get_stream(get_ready, StreamPosition()))
        # Servers drop messages for the standalone stream while none is connected: no call before it is.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self._settings.initialize_timeout):
                await asyncio.shield(get_ready)

    async def detach(self) -> None:
        self._alive = False
        if self._get_stream is not None:
            self._get_stream.close()  # `_reopen` finds the session over
        await self._cancel_tasks()
        if self._own_lean:
            await self._lean.close()

    async def close(self) -> None:
        was_alive = self._alive
        self._router.fail_all("session closed")
        await self.detach()
        if was_alive and self._session_id is not None:
            with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                async with self._http.delete(
                    self._settings.url, headers=self._headers(), timeout=aiohttp.ClientTimeout(total=5)
                ) as resp:
                    await finish_body(resp)

    # -- UpstreamSession ----------------------------------------------------------------------------------

    async def resume_call(self, inbox: Inbox, request_id: jsonrpc.RequestId, last_event_id: str) -> None:
        self._begin_call(request_id, inbox, last_event_id)
        self._spawn(self._resume_stream(request_id, inbox))

    async def send(self, message: jsonrpc.Response | jsonrpc.Notification) -> None:
        try:
            resp = await self._post(jsonrpc.dumps(message))
            try:
                if resp.status == 404 and self._session_id is not None:
                    self._die(SESSION_GONE)
                if (challenge := rejected_status(resp.status, resp.headers)) is not None:
                    raise challenge
                if resp.status >= 400:
                    kind = "notification" if isinstance(message, jsonrpc.Notification) else "response"
                    raise UpstreamError(f"upstream answered HTTP {resp.status} to a {kind}")
                await finish_body(resp)
            finally:
                resp.release()
        except aiohttp.ClientError as exc:
            raise UpstreamError(f"could not reach upstream: {type(exc).__name__}") from None

    # -- internals ----------------------------------------------------------------------------------------

    def _begin_call(self, rid: jsonrpc.RequestId, inbox: Inbox, last_event_id: str | None = None) -> None:
        self._router.begin_call(rid, inbox)
        self._call_event_id = last_event_id

    def _headers(self, *, post: bool = False) -> dict[str, str]:
        headers = with_propagated(self._settings.headers)  # + the client request's X-Request-Id, traceparent
        headers["Accept"] = ACCEPT if post else "text/event-stream"
        if post:
            headers["Content-Type"] = "application/json"
        if self._session_id is not None:
            headers["Mcp-Session-Id"] = self._session_id
        if self._info is not None and self._info.protocol_version >= "2025-06-18":
            headers["MCP-Protocol-Version"] = self._info.protocol_version
        return {header_name(name): value for name, value in headers.items()}

    async def _post(self, body: bytes) -> UpstreamResponse:
        url, headers, timeout = self._settings.url, self._headers(post=True), self._settings.connect_timeout
        return await self._lean.post(url, body, headers, tls=self._tls, connect_timeout=timeout)

    async def _deliver(self, req: jsonrpc.Request) -> None:
        """POST a request and dispatch everything its reply carries, until the response to it.

        A receiving call's reply stream is held for as long as the call is parked: this frame keeps neither
        the request (sent) nor aiohttp's request context manager and its finished coroutine (~1 KB; the
        response is entered directly)."""
        rid, initialize, body = req.id, req.method == "initialize", jsonrpc.dumps(req)
        del req
        try:
            resp = await self._post(body)
            del body
            if rid == self._router.receiver_id:  # its own task (SessionCore.call), which sends no more
                forget_propagated()
            later = False  # the body goes on after the response: a task finishes it, not `async with`
            try:
                if initialize and "mcp-session-id" in resp.headers:
                    self._session_id = resp.headers["mcp-session-id"]
                if resp.status == 404 and self._session_id is not None and not initialize:
                    raise session_gone(self._die)
                if resp.status >= 400:
                    raise await refused(resp)
                ctype = resp.headers.get("Content-Type", "")
                if ctype.startswith("text/event-stream"):
                    receiving = rid == self._router.receiver_id
                    track = self._track_call_event if receiving else None
                    answer = await self._read_sse(resp, until=rid, on_event_id=track, hold=receiving)
                    if not answer:
                        raise UpstreamError("upstream ended the stream before answering")
                    # The server closes the stream after the response (its last chunk is usually on the
                    # wire already): read to that end, so the connection goes back to the pool; in the
                    # background if it takes long (keepalive.py). A receiving call's answer waits for
                    # that: its client's next call must not need a second connection meanwhile.
                    try:
                        later = not await finish_body(resp, close=False)
                    finally:
                        if answer is not True:
                            self._dispatch(answer)
                else:
                    body = await read_body(resp, self._settings.max_message_bytes)
                    self._dispatch(jsonrpc.decode(body))
            finally:
                if later:
                    self._spawn(finish_later(resp))
                else:
                    await leave(resp)
        except jsonrpc.InvalidMessage as exc:
            raise UpstreamError(f"upstream sent an invalid JSON-RPC message: {exc}") from None
        except aiohttp.ClientError as exc:
            raise unreachable(exc, self._die) from None

    async def _read_sse(
        self,
        resp: UpstreamResponse,
        until: jsonrpc.RequestId | None,
        *,
        on_event_id: Callable[[str], None] | None = None,
        hold: bool = False,
    ) -> jsonrpc.Response | bool:
        """Dispatch the stream's messages; True once the response with id `until` was seen (with `hold`,
        that response, not dispatched: the caller dispatches it). False: the stream ended first.

        Event ids belong to their stream: `on_event_id` is told each one (for that stream's resumption).
        Each chunk is fed in a call of its own, so nothing of it (the bytes, the events, the last message)
        stays in this frame while it waits for the next: a parked call's stream waits for minutes.

        A line or event over `max_message_bytes` closes the connection and raises MessageTooLarge."""
        limit = self._settings.max_message_bytes
        decoder, content = SSEDecoder(max_event_bytes=limit), resp.content
        while True:
            await self._until_answered()  # a server flooding us with requests waits for their answers
            try:
                seen = self._feed(decoder, await content.readany(), until, on_event_id, hold)
            except SSEError:
                resp.close()
                raise MessageTooLarge(limit) from None
            if seen is not None:
                return seen

    def _feed(
        self,
        decoder: SSEDecoder,
        chunk: bytes,
        until: jsonrpc.RequestId | None,
        on_event_id: Callable[[str], None] | None,
        hold: bool = False,
    ) -> jsonrpc.Response | bool | None:
        """One chunk of `_read_sse`'s stream: True (`hold`: the response) once `until`'s response was seen,
        False at the end (an empty chunk), None for more."""
        if not chunk:
            return False
        for event in decoder.feed(chunk):
            msg = self._on_event(event, on_event_id=on_event_id, hold=until if hold else None)
            if until is not None and isinstance(msg, jsonrpc.Result | jsonrpc.Error) and msg.id == until:
                return msg if hold else True
        return None

    def _on_event(
        self,
        event: SSEEvent,
        *,
        standalone: bool = False,
        on_event_id: Callable[[str], None] | None = None,
        hold: jsonrpc.RequestId | None = None,
    ) -> jsonrpc.Message | None:
        """Dispatch one SSE event's message unless it answers `hold` (None: priming, or not JSON-RPC)."""
        if event.id is not None and on_event_id is not None:
            on_event_id(event.id)
        if not event.data.strip():
            return None  # priming event (SEP-1699)
        try:
            msg = jsonrpc.decode(event.data)
        except jsonrpc.InvalidMessage as exc:
            log.warning("upstream.bad_message", error=str(exc))
            return None
        if hold is None or not isinstance(msg, jsonrpc.Result | jsonrpc.Error) or msg.id != hold:
            self._dispatch(msg, standalone=standalone)
        return msg

    async def _run_get_stream(
        self, ready: asyncio.Future[None] | None, position: StreamPosition, delay: float = 0.0
    ) -> None:
        """Open the standalone GET stream (after `delay`): servers send unrelated requests (sampling, roots)
        on it. It lives as long as the session, on a lean protocol of its own (event_stream.py), and no task
        waits for it (~0.9 KB a session): this one ends once it is up; its end opens it again (`_reopen`).
        `ready` is done once the stream is up, or known to be unavailable."""
        detach_from_request()  # the stream is the session's, not the request's that opened it
        failures, held = 0, False
        await asyncio.sleep(delay)
        stream: EventStream | None = None

        def on_event(event: SSEEvent) -> None:
            self._on_event(event, standalone=True, on_event_id=position.saw)
            if self._backlogged and stream is not None and not stream.paused:
                stream.pause()  # a server flooding us with requests waits for their answers
                self._spawn(self._resume_when_answered(stream))

        while self._alive:
            headers = self._headers()
            if position.last_id is not None:
                headers["Last-Event-ID"] = position.last_id
            stream = None
            try:
                stream, head = await open_event_stream(
                    self._settings.url,
                    headers,
                    on_event,
                    tls=self._tls,
                    connect_timeout=self._settings.connect_timeout,
                    head_timeout=self._settings.initialize_timeout,
                    max_message_bytes=self._settings.max_message_bytes,
                )
                status = head.status
                del head, headers  # held for as long as the stream lives otherwise
                if status == 405:
                    settle(ready)
                    return  # the server offers no standalone stream
                if status == 404:
                    settle(ready)
                    self._die(SESSION_GONE)
                    return
                if status != 200:
                    raise UpstreamError(f"GET stream answered HTTP {status}")
                reopen = functools.partial(self._reopen, stream, position)
                stream.ended.add_done_callback(reopen, context=CALLBACK_CONTEXT)
                self._get_stream, held = stream, True
                settle(ready)
                return
            except (OSError, StreamEnded, UpstreamError, TimeoutError) as exc:
                failures += 1
                log.debug("upstream.get_stream_lost", error=str(exc), failures=failures)
            finally:
                if stream is not None and not held:
                    stream.close()
            if failures >= len(GET_RETRY_DELAYS):
                settle(ready)
                log.warning("upstream.get_stream_gave_up", session=self._session_id)
                return
            await asyncio.sleep(GET_RETRY_DELAYS[min(failures, len(GET_RETRY_DELAYS) - 1)])

    def _reopen(self, stream: EventStream, position: StreamPosition, ended: asyncio.Future[str]) -> None:
        log.debug("upstream.get_stream_ended", reason=ended.result())
        if self._get_stream is stream:
            self._get_stream = None
        if self._alive:
            self._spawn(self._run_get_stream(None, position, GET_RETRY_DELAYS[0]))

    async def _resume_when_answered(self, stream: EventStream) -> None:
        await self._until_answered()
        stream.resume()

    async def _resume_stream(self, rid: jsonrpc.RequestId, inbox: Inbox) -> None:
        """Resume the call's stream with `GET` + `Last-Event-ID` until its response arrives; re-open it with
        the newest event id when it ends or stays quiet for RESUME_WINDOW (the caller bounds the whole)."""
        try:
            while self._alive and self._router.receiver_id == rid:
                headers = self._headers()
                if self._call_event_id is not None:
                    headers["Last-Event-ID"] = self._call_event_id
                async with self._http.get(
                    self._settings.url, headers=headers, timeout=aiohttp.ClientTimeout(sock_connect=10)
                ) as resp:
                    if resp.status == 404:
                        self._die(SESSION_GONE)
                        return
                    if resp.status != 200:
                        raise UpstreamError(f"resuming the call's stream answered HTTP {resp.status}")
                    answered = False
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(RESUME_WINDOW):
                            track = self._track_call_event
                            answered = bool(await self._read_sse(resp, until=rid, on_event_id=track))
                    if answered:
                        await finish_body(resp)
                        return
                await asyncio.sleep(0.2)
        except (aiohttp.ClientError, UpstreamError) as exc:
            inbox.put_nowait(TransportLost(f"could not resume the call's stream: {exc}"))

    def _track_call_event(self, event_id: str) -> None:
        self._call_event_id = event_id

    def _die(self, reason: str) -> None:
        """Unlike `_lose`, every time: each 404 or refused connection fails whoever waits by then."""
        self._alive = False
        self._router.fail_all(reason)


__all__ = ["CLIENT_INFO", "NoCallAnswer", "SessionSettings", "StreamableHttpSession"]
