"""What the legacy bridge writes to its client: one POST's answer (SSE or JSON) and the GET stream."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from aiohttp import web

from proxy.calls.wording import shutting_down
from proxy.front.legacy.bridge.session import TICK, BridgedSession, BridgeSettings, RuntimeStateView
from proxy.front.reply import SSE_HEADERS, json_response, wants
from proxy.wire import jsonrpc
from proxy.wire.sse import encode_comment, encode_event


class BridgeReply:
    """One POST's answer: SSE when the client accepts it (started at the first message), else JSON."""

    def __init__(self, request: web.Request) -> None:
        self._request = request
        self.sse = wants(request)[1]
        self._stream: web.StreamResponse | None = None

    @property
    def request(self) -> web.Request:
        """The client's request this answers."""
        return self._request

    @property
    def gone(self) -> bool:
        """The client's connection is closed (it went away)."""
        transport = self._request.transport
        return transport is None or transport.is_closing()

    @property
    def started(self) -> bool:
        """An SSE stream was started: the status (200) is sent and can no longer change."""
        return self._stream is not None

    async def send(self, msg: jsonrpc.Message) -> None:
        await (await self._open()).write(encode_event(jsonrpc.dumps(msg).decode()))

    async def keepalive(self) -> None:
        if self.sse:
            await (await self._open()).write(encode_comment(" keep-alive"))

    async def finish(
        self, msg: jsonrpc.Message | None, headers: Mapping[str, str] | None = None
    ) -> web.StreamResponse:
        if self._stream is None and not self.sse:
            response = json_response(msg, 200 if msg is not None else 202)
            response.headers.update(headers or {})
            return response
        stream = await self._open(headers)
        if msg is not None:
            await stream.write(encode_event(jsonrpc.dumps(msg).decode()))
        await stream.write_eof()
        return stream

    async def _open(self, headers: Mapping[str, str] | None = None) -> web.StreamResponse:
        if self._stream is None:
            self._stream = web.StreamResponse(status=200, headers={**SSE_HEADERS, **(headers or {})})
            await self._stream.prepare(self._request)
        return self._stream


async def serve_get_stream(
    request: web.Request, bridged: BridgedSession, settings: BridgeSettings, state: RuntimeStateView | None
) -> web.StreamResponse:
    """The session's standalone GET stream: held messages as they come, until the session ends, the
    replica drains, or the client goes."""
    if not wants(request)[1]:
        return error_response(406, "The GET stream is text/event-stream; accept it")
    stream = web.StreamResponse(status=200, headers=SSE_HEADERS)
    await stream.prepare(request)
    loop, interval = asyncio.get_running_loop(), settings.keepalive
    next_keepalive = loop.time() + interval
    bridged.attach()
    try:  # until the session ends, the replica drains, or the client goes (a write fails, or cancelled)
        while bridged.alive and not (state is not None and state.draining):
            while bridged.held:
                msg = bridged.held.popleft()
                try:
                    await stream.write(encode_event(jsonrpc.dumps(msg).decode()))
                except BaseException:
                    bridged.held.appendleft(msg)  # not delivered: for the next GET stream
                    raise
            bridged.arrived.clear()
            try:
                async with asyncio.timeout(TICK):
                    await bridged.arrived.wait()
            except TimeoutError:
                if interval > 0 and loop.time() >= next_keepalive:
                    await stream.write(encode_comment(" keep-alive"))
                    next_keepalive = loop.time() + interval
        await stream.write_eof()
    except ConnectionError:
        pass
    finally:
        bridged.detach()
    return stream


def draining_response(again: str) -> web.Response:
    """503 with -31005 for what a draining replica does not start (calls/wording.py `shutting_down`)."""
    return json_response(jsonrpc.Error(None, shutting_down(again)), 503)


def error_response(status: int, message: str) -> web.Response:
    return json_response(jsonrpc.error(None, jsonrpc.INVALID_REQUEST, message), status)
