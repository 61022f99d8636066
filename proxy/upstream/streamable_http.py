"""A legacy Streamable HTTP session (protocol 2025-03-26 … 2025-11-25) to one upstream server.

`initialize` → `notifications/initialized` → a standalone GET stream held open; every POST carries
`Mcp-Session-Id` and `MCP-Protocol-Version`; replies come as JSON or SSE (the POSTs and their replies:
streamable_posts.py). Every server request, on whichever stream it arrives, goes to the one receiving call's
inbox; responses go to their waiter by id (routing and `initialize` negotiation live in `router.py`, shared
with the other transports). `DELETE` on close.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools

import aiohttp
import structlog

from proxy.upstream.base import Inbox, ServerInfo, TransportLost, UpstreamError
from proxy.upstream.event_stream import EventStream, StreamEnded, StreamPosition, open_event_stream, settle
from proxy.upstream.http_errors import SESSION_GONE, forgotten_session
from proxy.upstream.http_settings import SessionSettings
from proxy.upstream.keepalive import finish_body
from proxy.upstream.lean_http import LeanClient
from proxy.upstream.propagation import detach_from_request
from proxy.upstream.router import CLIENT_INFO, NoCallAnswer, negotiate
from proxy.upstream.session_core import CALLBACK_CONTEXT
from proxy.upstream.streamable_posts import StreamablePosts
from proxy.wire import jsonrpc, mcp
from proxy.wire.sse import SSEEvent

log = structlog.get_logger(__name__)

GET_RETRY_DELAYS = (0.1, 0.5, 1.0, 2.0, 5.0)
# A resumed call stream is re-opened (with the newest Last-Event-ID) after this long without its answer:
# some servers replay on a resumed GET but never attach live delivery to it (server-everything's example
# event store), so new events only arrive by asking again.
RESUME_WINDOW = 2.0


class StreamableHttpSession(StreamablePosts):
    """`UpstreamSession` over legacy Streamable HTTP: its POSTs (streamable_posts.py) and its GET streams."""

    _get_stream: EventStream | None = None  # the standalone stream, while it is up

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
        for reply in list(self._replies):
            reply.close()
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
                # A server that refuses the session's stream this long has most likely forgotten it (it
                # restarted: server-everything answers 400, not 404): the session takes no new work (the
                # pool opens another) rather than keep one whose requests would all fail; a call in flight
                # on its own POST stream is left to finish.
                self._alive = False
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
                    if resp.status in (400, 404) and forgotten_session(
                        resp.status, await resp.content.read(300)
                    ):
                        self._die(SESSION_GONE.replace("404", str(resp.status)))
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


__all__ = ["CLIENT_INFO", "NoCallAnswer", "SessionSettings", "StreamableHttpSession"]
