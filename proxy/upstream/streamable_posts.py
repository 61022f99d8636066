"""The POSTs of a legacy Streamable HTTP session and the replies they get (streamable_http.py is the session).

Every POST carries `Mcp-Session-Id` and `MCP-Protocol-Version` and goes on the pooled lean client
(lean_http.py). A reply is JSON or SSE (decoded with our own decoder, wire/sse.py); what it carries is
dispatched as it arrives (`SessionCore._dispatch`: a server request to the receiving call's inbox, a response
to its waiter). The receiving call's own reply is read by its response's callbacks where it can be
(call_reply.py: this class is its `ReplyOwner`), else in a task, as every other reply is read by the coroutine
that sent its request.
"""

from __future__ import annotations

import functools
import secrets
from collections.abc import Callable

import aiohttp
import structlog

from proxy.upstream.base import Inbox, UpstreamError
from proxy.upstream.bounded import MessageTooLarge, read_body
from proxy.upstream.call_reply import CallReply
from proxy.upstream.http_errors import (
    ENDED_UNANSWERED,
    SESSION_GONE,
    forgotten_session,
    invalid_message,
    refused,
    refused_or_gone,
    rejected_status,
    unreachable,
)
from proxy.upstream.http_settings import SessionSettings
from proxy.upstream.keepalive import finish_body, finish_later, leave
from proxy.upstream.lean_http import LeanClient
from proxy.upstream.lean_response import LeanResponse
from proxy.upstream.propagation import forget_propagated, header_name, with_propagated
from proxy.upstream.response import UpstreamResponse
from proxy.upstream.router import NoCallAnswer, Router
from proxy.upstream.session_core import SessionCore
from proxy.upstream.tls import context_of
from proxy.wire import jsonrpc
from proxy.wire.sse import SSEDecoder, SSEError, SSEEvent

log = structlog.get_logger("proxy.upstream.streamable_http")

ACCEPT = "application/json, text/event-stream"


class StreamablePosts(SessionCore):
    """A Streamable HTTP session's POSTs: on the pooled `lean` client (lean_http.py; None: one of its own,
    closed with the session); `http` (aiohttp's, whose SSL context both use) is for the session's GETs and
    DELETE (streamable_http.py)."""

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
        self._call_heard = False  # the server began answering the receiving call's POST (`_die`)
        self._replies: set[CallReply] = set()  # the receiving call's, read by callbacks (call_reply.py)

    @property
    def last_event_id(self) -> str | None:
        """The last SSE event id seen on the receiving call's stream (to resume it with Last-Event-ID)."""
        return self._call_event_id

    async def send(self, message: jsonrpc.Response | jsonrpc.Notification) -> None:
        try:
            resp = await self._post(jsonrpc.dumps(message))
            try:
                forgot = resp.status in (400, 404) and self._session_id is not None
                if forgot and forgotten_session(resp.status, await resp.content.read(300)):
                    self._die(SESSION_GONE.replace("404", str(resp.status)))
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
        self._call_event_id, self._call_heard = last_event_id, last_event_id is not None  # (resumed: it runs)

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
        except aiohttp.ClientError as exc:
            raise unreachable(exc, self._die) from None
        del body
        if rid == self._router.receiver_id:  # its own task (SessionCore._start_call), which sends no more
            forget_propagated()
            if resp.status == 200:  # as `CallReply._head` judges it (call_reply.py)
                self._call_heard = True
        await self._read_reply(resp, rid, initialize=initialize)

    async def _read_reply(
        self,
        resp: UpstreamResponse,
        rid: jsonrpc.RequestId,
        decoder: SSEDecoder | None = None,
        *,
        initialize: bool = False,
    ) -> None:
        """Read the reply to request `rid` from its head (or, with `decoder`, on from where the callbacks of a
        call reply left its SSE stream: call_reply.py), dispatching what it carries, then leave it."""
        try:
            try:
                answer = await self._answer_of(resp, rid, decoder, initialize=initialize)
            except BaseException:
                await leave(resp)
                raise
            await self._finish_answered(resp, answer)
        except jsonrpc.InvalidMessage as exc:
            raise invalid_message(exc) from None
        except aiohttp.ClientError as exc:
            raise unreachable(exc, self._die) from None

    async def _answer_of(
        self, resp: UpstreamResponse, rid: jsonrpc.RequestId, decoder: SSEDecoder | None, *, initialize: bool
    ) -> jsonrpc.Response | None:
        """Dispatch what the reply carries until the response to `rid`; a receiving call's response is
        returned instead (dispatched once the body ended: `_finish_answered`)."""
        if decoder is None:
            if initialize and "mcp-session-id" in resp.headers:
                self._session_id = resp.headers["mcp-session-id"]
            if resp.status >= 400 and self._session_id is not None and not initialize:
                raise await refused_or_gone(resp, functools.partial(self._forgotten, rid))
            if resp.status >= 400:
                raise await refused(resp)
        if decoder is not None or resp.headers.get("Content-Type", "").startswith("text/event-stream"):
            receiving = rid == self._router.receiver_id
            track = self._track_call_event if receiving else None
            answer = await self._read_sse(resp, rid, on_event_id=track, hold=receiving, decoder=decoder)
            if not answer:
                raise UpstreamError(ENDED_UNANSWERED)
            return None if answer is True else answer
        self._dispatch(jsonrpc.decode(await read_body(resp, self._settings.max_message_bytes)))
        return None

    async def _finish_answered(self, resp: UpstreamResponse, answer: jsonrpc.Response | None) -> None:
        """The server closes a reply stream after the response (its last chunk is usually on the wire
        already): read to that end, so the connection goes back to the pool; in the background if it takes
        long (keepalive.py). A receiving call's `answer` waits for that: its client's next call must not
        need a second connection meanwhile."""
        later = False
        try:
            later = not await finish_body(resp, close=False)
        finally:
            if answer is not None:
                self._dispatch(answer)
            if later:
                self._spawn(finish_later(resp))
            else:
                await leave(resp)

    # -- the receiving call's reply, read without a task where it can be (call_reply.py) ------------------

    def _start_call(self, req: jsonrpc.Request, inbox: Inbox) -> None:
        """The call's POST is written at once on an idle pooled connection, its reply read by callbacks;
        without an idle connection, a task connects and reads it (SessionCore)."""
        try:
            body, headers = jsonrpc.dumps(req), self._headers(post=True)
            resp = self._lean.send(self._settings.url, body, headers, tls=self._tls)
        except aiohttp.ClientError as exc:
            Router.delivery_failed(inbox, unreachable(exc, self._die))
            return
        except UpstreamError as exc:  # a request that cannot be written
            Router.delivery_failed(inbox, exc)
            return
        if resp is None:
            super()._start_call(req, inbox)
            return
        reply = CallReply(self, req.id, resp, inbox)
        self._replies.add(reply)
        reply.start()

    @property
    def reply_limit(self) -> int:
        return self._settings.max_message_bytes

    @property
    def backlogged(self) -> bool:
        return self._backlogged

    def reply_events(
        self, decoder: SSEDecoder, chunk: bytes, rid: jsonrpc.RequestId
    ) -> jsonrpc.Response | None:
        seen = self._feed(decoder, chunk, rid, self._track_call_event, hold=True)
        return None if isinstance(seen, bool) else seen

    def dispatch(self, msg: jsonrpc.Message) -> None:
        self._dispatch(msg)

    def heard(self) -> None:
        self._call_heard = True

    def connection_failed(self, exc: aiohttp.ClientError) -> UpstreamError:
        return unreachable(exc, self._die)

    def read_on(self, reply: CallReply, decoder: SSEDecoder | None) -> None:
        self._delivering(self._read_reply(reply.response, reply.rid, decoder), reply.inbox)

    def finish_rest(self, response: LeanResponse) -> None:
        self._spawn(finish_later(response))

    def reply_ended(self, reply: CallReply) -> None:
        self._replies.discard(reply)

    async def _read_sse(
        self,
        resp: UpstreamResponse,
        until: jsonrpc.RequestId | None,
        *,
        on_event_id: Callable[[str], None] | None = None,
        hold: bool = False,
        decoder: SSEDecoder | None = None,
    ) -> jsonrpc.Response | bool:
        """Dispatch the stream's messages; True once the response with id `until` was seen (with `hold`,
        that response, not dispatched: the caller dispatches it). False: the stream ended first.

        Event ids belong to their stream: `on_event_id` is told each one (for that stream's resumption).
        Each chunk is fed in a call of its own, so nothing of it (the bytes, the events, the last message)
        stays in this frame while it waits for the next: a parked call's stream waits for minutes.

        A line or event over `max_message_bytes` closes the connection and raises MessageTooLarge."""
        limit = self._settings.max_message_bytes
        decoder = SSEDecoder(max_event_bytes=limit) if decoder is None else decoder
        content = resp.content
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

    def _track_call_event(self, event_id: str) -> None:
        self._call_event_id = event_id

    def _forgotten(self, rid: jsonrpc.RequestId, reason: str) -> None:
        """The server forgot the session, answering request `rid`: that one did not run; the rest is lost."""
        self._router.refused_unrun(rid, reason)
        self._die(reason)

    def _die(self, reason: str) -> None:
        """Unlike `_lose`, every time: each 404 or refused connection fails whoever waits by then. The
        receiving call only once the server began answering it: it may have run. Until then its own POST is
        still out, learning of the session's end from another exchange (its GET stream's 404, another
        request's refused connection), and that POST's own outcome says what happened — a 404 that it never
        ran (`_forgotten`: sent again on a new session), a head that it runs. Told "may have run" first, a
        call that never ran would fail."""
        self._alive = False
        self._router.fail_all(reason, spare_call=not self._call_heard)


__all__ = ["ACCEPT", "StreamablePosts"]
