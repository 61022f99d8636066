"""What the rest of the proxy needs from one legacy session, whatever transport carries it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from proxy.upstream.inbox import LeanQueue
from proxy.wire import jsonrpc


@dataclass(frozen=True, slots=True)
class TransportLost:
    """Put into a call's inbox when the upstream can no longer deliver the call's messages. `delivered` is
    False only when the upstream certainly never processed the call's request (see NotDelivered)."""

    reason: str
    delivered: bool = True
    challenge: UpstreamAuthChallenge | None = None  # the upstream refused the credentials (401/403)
    refused: bool = False  # the upstream refused the request by its HTTP status (4xx): it did not run it


Incoming = jsonrpc.Message | TransportLost
Inbox = LeanQueue[Incoming]  # one per call (inbox.py)
# Told each session-wide notification (called synchronously, as the message is routed; must not block).
SessionListener = Callable[[jsonrpc.Notification], None]


class UpstreamError(Exception):
    """The upstream failed a session-level operation (connect, initialize, a plain request)."""


class UpstreamAuthChallenge(UpstreamError):
    """The upstream refused the forwarded credentials (HTTP 401 or 403): relayed to the client with the
    upstream's `WWW-Authenticate` adapted (front/oauth.py), never retried with another protocol version."""

    def __init__(self, status: int, www_authenticate: str | None) -> None:
        super().__init__(f"upstream answered HTTP {status} (authorization required)")
        self.status = status
        self.www_authenticate = www_authenticate


class HttpRefused(UpstreamError):
    """The upstream answered an HTTP error status other than 401/403 (`status`). On `initialize`, 404 and
    405 (`NOT_AN_ENDPOINT`) say the URL is no Streamable HTTP endpoint — not that the version is unwelcome."""

    NOT_AN_ENDPOINT = frozenset({404, 405})

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status

    @property
    def not_an_endpoint(self) -> bool:
        return self.status in self.NOT_AN_ENDPOINT


class NotDelivered(UpstreamError):
    """The upstream certainly did not process the request: the connection was refused, or the upstream no
    longer knows the session (it restarted). Safe to send again on a fresh session — nothing can run twice."""


@dataclass(frozen=True, slots=True, weakref_slot=True)
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

    async def resume_call(self, inbox: Inbox, request_id: jsonrpc.RequestId, last_event_id: str) -> None:
        """Become the receiver of a call another replica started on this session: resume its stream after
        `last_event_id` and deliver its messages (and finally its response, `request_id`) to `inbox`.
        Raises UpstreamError when the transport cannot do that."""
        ...

    def end_call(self) -> None:
        """The receiving call is over: later server requests get the no-call-in-flight answer."""
        ...

    def watch(self, listener: SessionListener | None) -> None:
        """Session-wide notifications (list changes, resource updates; see `SESSION_WIDE_NOTIFICATIONS` in
        router.py) go to `listener` from now on; None (the default) drops them."""
        ...

    def hear(self, heard: SessionListener) -> None:
        """`heard` is told every session-wide notification too, whoever watches (the pool's: list changes
        make the aggregated routes' cached list pages stale)."""
        ...

    async def request(self, method: str, params: Mapping[str, Any], timeout: float) -> jsonrpc.Response:
        """A request whose answer is all that matters (lists, completion). Raises UpstreamError."""
        ...

    async def send(self, message: jsonrpc.Response | jsonrpc.Notification) -> None:
        """Answer a server request, or send a notification. Raises UpstreamError."""
        ...

    async def close(self) -> None: ...

    async def detach(self) -> None:
        """Stop using the session here without ending it upstream (no cancel, no DELETE), so another
        replica can resume its call. Transports whose sessions die with their connection just close."""
        ...
