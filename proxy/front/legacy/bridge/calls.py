"""A bridged session's calls (front/legacy/bridge/front.py): run upstream one at a time, their server requests
and notifications passed on to the client as they come, a call whose client went away run on to its end."""

from __future__ import annotations

import asyncio

import structlog
from aiohttp import web

from proxy.calls.wording import session_busy, unavailable, upstream_failed, went_silent
from proxy.front.legacy.bridge.session import TICK, BridgedCall, BridgedSession, BridgeSettings
from proxy.front.legacy.bridge.streams import BridgeReply
from proxy.front.legacy.bridge.wire import upstream_cancel, with_id
from proxy.upstream.base import Inbox, TransportLost, UpstreamError, UpstreamSession
from proxy.upstream.propagation import detach_from_request
from proxy.wire import jsonrpc, mcp

log = structlog.get_logger("proxy.front.legacy_bridge")


class BridgeCalls:
    """The requests of bridged sessions: plain ones concurrently, MRTR-capable ones as the session's call."""

    def __init__(self, settings: BridgeSettings) -> None:
        self._settings = settings

    async def request(
        self, request: web.Request, bridged: BridgedSession, msg: jsonrpc.Request
    ) -> web.StreamResponse:
        reply = BridgeReply(request)
        session = bridged.session
        assert session is not None
        if msg.method not in mcp.MRTR_METHODS:  # nothing asks the client during these: concurrent
            try:
                plain = await session.request(msg.method, msg.params, self._settings.call_timeout)
            except UpstreamError as exc:
                plain = jsonrpc.Error(msg.id, unavailable(bridged.config.name, exc))
            return await reply.finish(with_id(plain, msg.id))
        try:
            async with asyncio.timeout(self._settings.call_timeout):
                await bridged.turn.acquire()
        except TimeoutError:
            return await reply.finish(jsonrpc.Error(msg.id, session_busy()))
        call: BridgedCall | None = None
        handed_off = False
        try:
            inbox: Inbox = Inbox()
            call = bridged.call = BridgedCall(
                msg.id, await session.call(msg.method, msg.params, inbox), inbox
            )
            answer = await self._pump(bridged, session, call, reply)
        except (asyncio.CancelledError, ConnectionError):  # the client went away: the call runs on
            if call is not None:
                bridged.spawn(self._orphan(bridged, session, call))
                handed_off = True
            raise
        finally:
            if not handed_off:
                self._end_call(bridged, session, call)
        return await reply.finish(answer)

    def _end_call(self, bridged: BridgedSession, session: UpstreamSession, call: BridgedCall | None) -> None:
        if call is not None:
            session.end_call()
            bridged.call = None
        bridged.turn.release()

    async def _orphan(self, bridged: BridgedSession, session: UpstreamSession, call: BridgedCall) -> None:
        """The call of a client that went away runs on: what it was asked gets an error upstream (nobody
        will answer it), what it is asked from now on goes to the GET stream, its response is dropped."""
        detach_from_request()
        log.info("legacy_bridge.client_gone", upstream=bridged.config.name, unanswered=len(call.asked))
        try:
            for rid in call.asked:
                bridged.answer_later(jsonrpc.error(rid, jsonrpc.INTERNAL_ERROR, "The client went away"))
            call.asked.clear()
            await self._pump(bridged, session, call, None)
        except Exception:
            log.exception("legacy_bridge.orphan_failed", upstream=bridged.config.name)
        finally:
            self._end_call(bridged, session, call)

    async def _pump(
        self, bridged: BridgedSession, session: UpstreamSession, call: BridgedCall, reply: BridgeReply | None
    ) -> jsonrpc.Response | None:
        """Pass the call's server requests and notifications on (to `reply`, else the GET stream) until its
        response, which comes back under the client's id. None: the client cancelled and nothing came."""
        settings, loop = self._settings, asyncio.get_running_loop()
        last = written = loop.time()
        while True:
            limit = settings.answer_timeout if call.asked else settings.call_timeout
            deadline = last + limit
            if call.cancelled_at is not None:
                deadline = min(deadline, call.cancelled_at + settings.cancel_grace)
            try:
                async with asyncio.timeout(max(0.0, min(TICK, deadline - loop.time()))):
                    item = await call.inbox.get()
            except TimeoutError:
                now = loop.time()
                if now >= deadline:
                    if call.cancelled_at is not None:
                        return None
                    cancel = {"requestId": call.upstream_id, "reason": "timed out in mrtr-proxy"}
                    await bridged.send_quietly(jsonrpc.Notification(mcp.CANCELLED, cancel))
                    return jsonrpc.Error(call.client_id, went_silent(limit))
                if reply is not None and 0 < settings.keepalive <= now - written:
                    await reply.keepalive()
                    written = now
                continue
            last = loop.time()
            if isinstance(item, TransportLost):
                return jsonrpc.Error(call.client_id, upstream_failed(item.reason))
            if isinstance(item, jsonrpc.Result | jsonrpc.Error):
                return with_id(item, call.client_id)
            if isinstance(item, jsonrpc.Request):
                call.asked.add(item.id)
            if reply is not None and reply.sse:
                await reply.send(item)
                written = loop.time()
            elif (answer := bridged.hold(item)) is not None:
                await bridged.send_quietly(answer)

    async def notification(
        self, bridged: BridgedSession, session: UpstreamSession, note: jsonrpc.Notification
    ) -> None:
        if note.method == mcp.CANCELLED:
            call = bridged.call
            mapped = upstream_cancel(note, call.client_id, call.upstream_id) if call is not None else None
            if call is None or mapped is None:
                return  # not the call in flight: the client's ids mean nothing upstream
            call.cancelled_at = asyncio.get_running_loop().time()
            note = mapped
        await session.send(note)
