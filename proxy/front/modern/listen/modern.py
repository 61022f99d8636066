"""A 2026-07-28 member of an aggregated route's `subscriptions/listen` (listen.py): the proxy listens to it
the way a 2026-07-28 client does, with a listen request of its own on the native relay (relay.py).

A modern upstream has no legacy session to watch: its list_changed and resource updates reach only the
listen streams it serves. The member's stream is opened with the part of the client's filter that is this
upstream's (the list_changed flags, the URIs it listed), its acknowledgement says what it honors (waited
for, bounded, before the client's own acknowledgement is written; never relayed), and every notification
after it goes to the client's stream, re-stamped with the client's subscription id. Closing the member's
stream ends the upstream's subscription; a stream the upstream ends ends the client's (it re-listens), as
a legacy member's dead session does.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping
from typing import Any

import structlog

from proxy.front.modern.relay.native import NativeRelay
from proxy.upstream.base import UpstreamError
from proxy.wire import jsonrpc, mcp

log = structlog.get_logger(__name__)

ACK_TIMEOUT = 10.0  # seconds a modern member has to acknowledge the proxy's listen request
CLOSE_TIMEOUT = 5.0  # seconds its stream's task has to end once cancelled

Push = Callable[[jsonrpc.Notification], None]


class ModernMember:
    """The proxy's listen stream to one modern upstream, on behalf of one client's listen."""

    def __init__(self, relay: NativeRelay, upstream: str, push: Push) -> None:
        self.upstream = upstream
        self._relay = relay
        self._push = push
        self._acked: asyncio.Future[Mapping[str, Any] | None] = asyncio.get_running_loop().create_future()
        self._task: asyncio.Task[None] | None = None
        self.refusal: jsonrpc.ErrorObject | None = None  # the upstream's error answer to the listen, if any

    @property
    def alive(self) -> bool:
        return self._task is not None and not self._task.done()

    async def open(
        self,
        rid: jsonrpc.RequestId,
        notifications: Mapping[str, Any],
        *,
        meta: object,
        forwarded: tuple[tuple[str, str], ...],
    ) -> Mapping[str, Any] | None:
        """Start listening; the filter the upstream acknowledged (None: it refused, failed or said nothing
        in time, logged; the member is then closed)."""
        params: dict[str, Any] = {"notifications": dict(notifications)}
        if isinstance(meta, dict):
            params["_meta"] = meta
        request = jsonrpc.Request(rid, mcp.LISTEN, params)
        self._task = asyncio.create_task(self._run(request, forwarded), name=f"listen-{self.upstream}")
        try:
            async with asyncio.timeout(ACK_TIMEOUT):
                honored = await asyncio.shield(self._acked)
        except TimeoutError:
            log.warning("listen.upstream_left_out", upstream=self.upstream, reason="no acknowledgement")
            honored = None
        if honored is None:
            await self.close()
        return honored

    async def close(self) -> None:
        task, self._task = self._task, None
        if task is None or task.done():
            return
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, TimeoutError):
            async with asyncio.timeout(CLOSE_TIMEOUT):
                await task

    async def _run(self, request: jsonrpc.Request, forwarded: tuple[tuple[str, str], ...]) -> None:
        try:
            answer = await self._relay.plain(self.upstream, request, forwarded, None, on_note=self._note)
            if isinstance(answer, jsonrpc.Error):
                self.refusal = answer.error
        except (UpstreamError, TimeoutError) as exc:
            why = str(exc) or type(exc).__name__
            log.warning("listen.upstream_left_out", upstream=self.upstream, reason=why)
            return
        finally:
            if not self._acked.done():
                self._acked.set_result(None)
        if isinstance(answer, jsonrpc.Error):  # a server without listen (FastMCP 4.2.3): usual, not a fault
            quiet = answer.error.code == jsonrpc.METHOD_NOT_FOUND
            (log.info if quiet else log.warning)(
                "listen.upstream_left_out", upstream=self.upstream, reason=answer.error.message
            )
        else:
            log.info("listen.upstream_ended", upstream=self.upstream)

    async def _note(self, note: jsonrpc.Notification) -> None:
        if note.method == mcp.LISTEN_ACKNOWLEDGED:
            honored = note.params.get("notifications")
            if not self._acked.done():
                self._acked.set_result(honored if isinstance(honored, dict) else {})
            return
        if self._acked.done():  # nothing before the acknowledgement belongs to the subscription
            self._push(note)
