"""A JSON-RPC conversation over one message stream (HTTP+SSE's GET stream, a child's stdout), and how the
probe answers the server's own requests. The transports feed `deliver`; the probe calls `request`."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable
from typing import Any

from proxy.wire import jsonrpc, mcp

Send = Callable[[bytes], Awaitable[None]]

# Declared at initialize: what the proxy declares, so servers register their asking tools.
CLIENT_CAPABILITIES: dict[str, Any] = {
    "elicitation": {"form": {}, "url": {}},
    "sampling": {},
    "roots": {"listChanged": True},
}
CLIENT_INFO = {"name": "mrtr-proxy-probe", "version": "1"}


class ProbeError(Exception):
    """A step failed; the message is one line a person can act on."""


def initialize_params(version: str) -> dict[str, Any]:
    return {"protocolVersion": version, "capabilities": CLIENT_CAPABILITIES, "clientInfo": CLIENT_INFO}


def decode(data: str) -> jsonrpc.Message | None:
    """One JSON-RPC message from a line or an event's data; None for anything else (skipped)."""
    try:
        return jsonrpc.decode(data)
    except jsonrpc.InvalidMessage:
        return None


def answer(request: jsonrpc.Request) -> jsonrpc.Response:
    """The probe's answer to a server→client request: nothing a tool could act on (declined, empty)."""
    if request.method == mcp.ROOTS:
        return jsonrpc.Result(request.id, {"roots": []})
    if request.method == mcp.ELICIT:
        return jsonrpc.Result(request.id, {"action": "decline"})
    if request.method == mcp.PING:
        return jsonrpc.Result(request.id, {})
    if request.method == mcp.SAMPLE:
        return jsonrpc.error(request.id, -1, "mrtr-proxy probe does not sample")
    return jsonrpc.error(request.id, jsonrpc.METHOD_NOT_FOUND, f"Method not found: {request.method}")


class Recorder:
    """Which server→client requests arrived, inside a call (`--call`) or outside any call."""

    def __init__(self) -> None:
        self.in_call = False
        self.during_call: list[str] = []
        self.outside: list[str] = []
        self.on_get_stream: list[str] = []  # Streamable HTTP: those that came on the standalone GET stream

    def saw(self, method: str, *, on_get_stream: bool = False) -> None:
        (self.during_call if self.in_call else self.outside).append(method)
        if on_get_stream:
            self.on_get_stream.append(method)


class StreamChannel:
    """Requests out through `send`, every message back through `deliver` (one stream carries them all)."""

    def __init__(self, send: Send, recorder: Recorder) -> None:
        self._send = send
        self._pending: dict[jsonrpc.RequestId, asyncio.Future[jsonrpc.Response]] = {}
        self._ids = itertools.count(1)
        self.recorder = recorder
        self.closed: str | None = None
        # The server's notifications (the era step's `subscriptions/listen` watches for its acknowledgment)
        self.on_note: Callable[[jsonrpc.Notification], Awaitable[None]] | None = None

    async def request(self, method: str, params: jsonrpc.JSONObject, timeout: float) -> jsonrpc.Response:
        if self.closed is not None:
            raise ProbeError(self.closed)
        rid = next(self._ids)
        future: asyncio.Future[jsonrpc.Response] = asyncio.get_running_loop().create_future()
        self._pending[rid] = future
        try:
            await self._send(jsonrpc.dumps(jsonrpc.Request(rid, method, params)))
            return await asyncio.wait_for(future, timeout)
        except TimeoutError:
            raise ProbeError(f"{method}: no answer within {timeout:g}s") from None
        finally:
            self._pending.pop(rid, None)
            if future.done() and not future.cancelled():
                future.exception()  # retrieved: a stream that ended while we were still sending

    async def notify(self, method: str, params: jsonrpc.JSONObject) -> None:
        await self._send(jsonrpc.dumps(jsonrpc.Notification(method, params)))

    async def deliver(self, message: jsonrpc.Message) -> None:
        if isinstance(message, jsonrpc.Request):
            self.recorder.saw(message.method)
            await self._send(jsonrpc.dumps(answer(message)))
        elif isinstance(message, jsonrpc.Result | jsonrpc.Error):
            future = self._pending.get(message.id) if message.id is not None else None
            if future is not None and not future.done():
                future.set_result(message)
        elif isinstance(message, jsonrpc.Notification) and self.on_note is not None:
            await self.on_note(message)

    def fail(self, why: str) -> None:
        """The stream ended: every waiting request fails with `why`."""
        self.closed = why
        for future in self._pending.values():
            if not future.done():
                future.set_exception(ProbeError(why))
