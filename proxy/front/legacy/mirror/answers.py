"""The mirror's answers and cancels (mirror/front.py): a legacy client's answer to an inline request,
or its `notifications/cancelled`, reaches the call it is for, on whichever replica holds it.

An answer's id is a sealed ask id (handle/mirror_ids.py) naming the replica of its call: an answer that
lands elsewhere is sent on there, signed, over the peer route MIRROR_PEER_PATH (202 once delivered). An
answer for no waiting call (ended, timed out, another session's) is 404. A cancel names no replica: the
replica it lands on ends the call if it holds it, else asks every peer.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable

import structlog
from aiohttp import web

from proxy.front.legacy.bridge.streams import error_response
from proxy.front.legacy.mirror.calls import MirrorCalls, MirrorSettings
from proxy.front.peers import Peers, PeerUnreachable
from proxy.handle import HandleCodec, HandleError
from proxy.handle.mirror_ids import MirrorSession, open_ask
from proxy.handle.peer_auth import PeerAuthError
from proxy.wire import jsonrpc, mcp

log = structlog.get_logger("proxy.front.mirror")

MIRROR_PEER_PATH = "/_mrtr/peer/mirror"  # a client's answer or cancel, sent on to the replica of its call
NO_CALL = "No call waits for this answer (it ended, was cancelled, or its time ran out)"
SESSION_PARAM = "mrtr-proxy/session"  # in a cancel sent on to the peers: the session's token


class MirrorAnswers:
    def __init__(
        self,
        codec: HandleCodec,
        settings: MirrorSettings,
        calls: MirrorCalls,
        peers: Peers | None,
        replicas: Callable[[], Awaitable[list[str]]] | None,  # the others, for a cancel
    ) -> None:
        self._codec, self._settings, self.calls = codec, settings, calls
        self._peers, self._replicas = peers, replicas

    async def peer_route(self, request: web.Request) -> web.Response:
        """The peer route: a client's answer, or its cancel, sent on by the replica it landed on (signed)."""
        body = await request.read()
        if self._peers is None:
            return web.Response(status=404)
        try:
            self._peers.authenticate(request.method, request.path, body, request.headers)
        except PeerAuthError as exc:
            log.warning("mirror.peer_auth_failed", reason=exc.reason, remote=request.remote)
            return web.Response(status=401)
        try:
            msg = jsonrpc.decode(body)
            if isinstance(msg, jsonrpc.Notification) and msg.method == mcp.CANCELLED:
                token = msg.params.get(SESSION_PARAM)
                found = isinstance(token, str) and self.calls.cancel(token, msg.params.get("requestId"))
                return web.Response(status=202 if found else 404)
            if not isinstance(msg, jsonrpc.Result | jsonrpc.Error):
                return web.Response(status=400)
            ask = open_ask(self._codec, msg.id, time.time())
        except (jsonrpc.InvalidMessage, HandleError):
            return web.Response(status=400)
        return web.Response(status=202 if self.calls.deliver(ask, msg) else 404)

    async def answer(
        self, session: MirrorSession, msg: jsonrpc.Result | jsonrpc.Error, body: bytes
    ) -> web.Response:
        """A client's answer to an inline request: to its call, here or on the replica named in its id."""
        try:
            ask = open_ask(self._codec, msg.id, time.time())
        except HandleError as exc:
            log.info("mirror.answer_refused", reason=exc.reason)
            return error_response(404, NO_CALL)
        if ask.session != session.token:
            return error_response(404, NO_CALL)
        if ask.owner == self._settings.owner or self._peers is None:
            delivered = self.calls.deliver(ask, msg)
        else:
            try:
                delivered = await self._peers.deliver(ask.owner, MIRROR_PEER_PATH, body) == 202
                log.info("mirror.answer_forwarded", owner=ask.owner, delivered=delivered)
            except PeerUnreachable as exc:
                log.warning("mirror.owner_unreachable", owner=ask.owner, error=str(exc))
                delivered = False
        return web.Response(status=202) if delivered else error_response(404, NO_CALL)

    async def cancel(self, session: MirrorSession, note: jsonrpc.Notification) -> None:
        """End the call the client's cancel names: here, or (with `replica.peers`) on whichever replica
        holds it; the cancel says nothing of where its call runs, so every peer is asked."""
        rid = note.params.get("requestId")
        if self.calls.cancel(session.token, rid) or self._replicas is None or self._peers is None:
            return
        peers = self._peers
        params = {"requestId": rid, SESSION_PARAM: session.token}
        body = json.dumps({"jsonrpc": "2.0", "method": mcp.CANCELLED, "params": params}).encode()
        addresses = await self._replicas()
        found = await asyncio.gather(
            *(peers.deliver(a, MIRROR_PEER_PATH, body) for a in addresses), return_exceptions=True
        )
        for address, failed in zip(addresses, found, strict=True):
            if isinstance(failed, BaseException):  # that peer may hold the call: it then runs on to its end
                error = f"{type(failed).__name__}: {failed}"
                log.warning("mirror.cancel_not_sent", peer=address, error=error)
        log.info("mirror.cancel_sent_on", peers=len(addresses), found=sum(1 for f in found if f == 202))
