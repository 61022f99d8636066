"""What the rest of the proxy needs from one legacy session, whatever transport carries it."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from proxy.wire import jsonrpc


@dataclass(frozen=True, slots=True)
class TransportLost:
    """Put into a call's inbox when the upstream can no longer deliver the call's messages."""

    reason: str


Incoming = jsonrpc.Message | TransportLost
Inbox = asyncio.Queue[Incoming]


class UpstreamError(Exception):
    """The upstream failed a session-level operation (connect, initialize, a plain request)."""


@dataclass(frozen=True, slots=True)
class ServerInfo:
    """The upstream's `initialize` result, which `server/discover` is built from."""

    protocol_version: str
    capabilities: Mapping[str, Any]
    server_info: Mapping[str, Any]
    instructions: str | None


class UpstreamSession(Protocol):
    """One live legacy session. At most one *receiving* call runs on it at a time (see `call`)."""

    @property
    def session_id(self) -> str | None: ...

    @property
    def info(self) -> ServerInfo: ...

    @property
    def alive(self) -> bool: ...

    @property
    def last_event_id(self) -> str | None: ...

    async def call(self, method: str, params: Mapping[str, Any], inbox: Inbox) -> jsonrpc.RequestId:
        """Send a request that may receive server requests. Every message that belongs to it — server
        requests, notifications (on any stream of the session) and finally its response — goes to `inbox`,
        until `end_call`. Failures arrive in the inbox as `TransportLost`."""
        ...

    def end_call(self) -> None:
        """The receiving call is over: later server requests get the no-call-in-flight answer."""
        ...

    async def request(self, method: str, params: Mapping[str, Any], timeout: float) -> jsonrpc.Response:
        """A request whose answer is all that matters (lists, completion). Raises UpstreamError."""
        ...

    async def send(self, message: jsonrpc.Response | jsonrpc.Notification) -> None:
        """Answer a server request, or send a notification. Raises UpstreamError."""
        ...

    async def close(self) -> None: ...
