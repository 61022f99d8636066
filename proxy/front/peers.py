"""Forwarding a retry to the replica that holds its parked call, and relaying the answer unchanged.

Every forwarded request is signed (`proxy/handle/peer_auth.py`: an HMAC keyed from the ring, over method,
path, body, time and the forwarding replica) and the owner refuses one that is not; the owner also unseals
and checks the handle as for any retry, and never forwards again (its forward route is local-only), so a
forwarding loop cannot happen.

What a failure means is kept apart, because it decides whether the retry may be handled elsewhere:
- `PeerUnreachable`: nothing reached the owner (connection refused or not established, or the owner said
  it did not process the request): taking the call over, or declaring it lost, is safe.
- `PeerLost`: the owner took the request and then went away before answering (connection dropped, or the
  answer cut off): the input may have reached the upstream; the outcome is unknown.
- `PeerRefused`: a replica answered at the owner's address and refused the forward's signature (its 401
  says so in `X-Mrtr-Peer-Refused`): the owner restarted with other keys, or its key ring no longer shares
  one with this replica's. Nothing was done with the retry there; whether that replica still holds the
  call cannot be told (a restart lost it; a rotation that went wrong did not), so the call is not taken
  over, which could drive it twice: it is reported lost, never re-run.
Each forward opens its own connection, so a request is never written into a kept-alive connection the
owner is already closing (which would make a refusal look like a loss).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

import aiohttp
import structlog
from aiohttp import web

from proxy.calls.wording import outcome_unknown
from proxy.handle import KeyRing
from proxy.handle.peer_auth import PEER_AUTH, PeerAuthError, sign, verify
from proxy.upstream.propagation import with_propagated
from proxy.wire import jsonrpc
from proxy.wire.sse import encode_event

FORWARD_PREFIX = "/_mrtr/forward"
FORWARDED_BY = "X-Mrtr-Forwarded-By"
NOT_PROCESSED = "X-Mrtr-Not-Processed"  # on a 503 from an owner that is stopping: nothing was done
PEER_REFUSED = "X-Mrtr-Peer-Refused"  # on the peer route's 401: why the signature was refused
# Not passed between replicas: connection-level, recomputed, or ours.
_SKIP_REQUEST = frozenset(
    {"host", "content-length", "connection", "keep-alive", "proxy-connection", "te", "trailer",
     "transfer-encoding", "upgrade", FORWARDED_BY.lower(), PEER_AUTH.lower()}
)  # fmt: skip
_KEEP_RESPONSE = ("Content-Type", "Cache-Control", "X-Accel-Buffering", "Retry-After", "WWW-Authenticate")

log = structlog.get_logger(__name__)


class PeerUnreachable(Exception):
    """Nothing was delivered to the owner replica."""


class PeerLost(Exception):
    """The owner accepted the retry and went away before answering: the outcome is unknown. `stream`: the
    SSE stream already relayed to the client, cut at an event boundary, on which the answer may go on."""

    def __init__(self, reason: str, stream: web.StreamResponse | None = None) -> None:
        super().__init__(reason)
        self.stream = stream


class PeerRefused(Exception):
    """The replica at the owner's address refused the forward's signature (`reason`: the peer-auth reason,
    e.g. `unknown_key`); nothing was done with the retry there."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Peers:
    def __init__(
        self,
        self_address: str,
        ring: Callable[[], KeyRing],
        *,
        connect_timeout: float = 2.0,
        answer_timeout: float | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._self = self_address
        self._ring = ring
        self._clock = clock
        self._timeout = aiohttp.ClientTimeout(total=answer_timeout, sock_connect=connect_timeout)
        self._http: aiohttp.ClientSession | None = None

    async def close(self) -> None:
        if self._http is not None:
            await self._http.close()

    def _client(self) -> aiohttp.ClientSession:
        if self._http is None:  # a fresh connection per forward: see the module docstring
            self._http = aiohttp.ClientSession(  # forwards every user's retries: no cookie jar
                connector=aiohttp.TCPConnector(force_close=True, limit=0), cookie_jar=aiohttp.DummyCookieJar()
            )
        return self._http

    def ring(self) -> KeyRing:
        return self._ring()

    def authenticate(self, method: str, path: str, body: bytes, headers: Mapping[str, str]) -> str:
        """Check a peer's signature (raises PeerAuthError); returns the key id it signed with."""
        forwarder = headers.get(FORWARDED_BY)
        if not isinstance(forwarder, str):
            raise PeerAuthError("missing")
        return verify(
            self._ring(),
            headers.get(PEER_AUTH),
            method=method,
            path=path,
            body=body,
            forwarded_by=forwarder,
            now=self._clock(),
        )

    def signed_headers(self, method: str, path: str, body: bytes) -> dict[str, str]:
        return {
            FORWARDED_BY: self._self,
            PEER_AUTH: sign(
                self._ring(), method=method, path=path, body=body, forwarded_by=self._self, now=self._clock()
            ),
        }

    async def deliver(self, owner: str, path: str, body: bytes) -> int:
        """POST `body` to the peer route `path` of `owner`, signed; the status it answers. Raises
        PeerUnreachable when no answer came (bounded by the connect timeout and 10 s)."""
        headers = {"Content-Type": "application/json", **self.signed_headers("POST", path, body)}
        timeout = aiohttp.ClientTimeout(total=10, sock_connect=self._timeout.sock_connect)
        try:
            url = f"http://{owner}{path}"
            async with self._client().post(
                url, data=body, headers=with_propagated(headers), timeout=timeout
            ) as resp:
                await resp.read()
                return resp.status
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise PeerUnreachable(f"{owner}: {type(exc).__name__}") from None

    async def forward(
        self, owner: str, request: web.Request, body: bytes, request_id: jsonrpc.RequestId | None = None
    ) -> web.StreamResponse:
        """Send the retry to `owner` and stream its answer back. Raises PeerUnreachable (nothing reached
        the owner), PeerRefused (a replica there refused the signature: other keys) or PeerLost (it took the
        retry, then went away before any answer reached the client)."""
        path = f"{FORWARD_PREFIX}{request.path}"
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _SKIP_REQUEST}
        headers = with_propagated(headers)  # the owner logs (and traces) it under the same request id
        headers.update(self.signed_headers("POST", path, body))
        try:
            upstream = await self._client().post(
                f"http://{owner}{path}", data=body, headers=headers, timeout=self._timeout
            )
        except (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError) as exc:
            raise PeerUnreachable(f"{owner}: {type(exc).__name__}") from None
        except (aiohttp.ClientError, TimeoutError) as exc:  # sent, and no answer came back
            raise PeerLost(f"{owner}: {type(exc).__name__}") from None
        async with upstream:
            if upstream.status == 503 and upstream.headers.get(NOT_PROCESSED) == "1":
                raise PeerUnreachable(f"{owner}: stopping, not processed")
            if upstream.status == 401 and PEER_REFUSED in upstream.headers:
                raise PeerRefused(upstream.headers[PEER_REFUSED][:64])
            out = web.StreamResponse(
                status=upstream.status,
                headers={k: upstream.headers[k] for k in _KEEP_RESPONSE if k in upstream.headers},
            )
            sse = upstream.headers.get("Content-Type", "").startswith("text/event-stream")
            try:
                first = await upstream.content.readany()
            except (aiohttp.ClientError, TimeoutError) as exc:
                raise PeerLost(f"{owner}: {type(exc).__name__} before the answer") from None
            await out.prepare(request)
            tail = b"\n\n"
            try:
                chunk = first
                while chunk:
                    await out.write(chunk)
                    tail = (tail + chunk)[-2:]
                    chunk = await upstream.content.readany()
            except (aiohttp.ClientError, TimeoutError) as exc:
                # Cut off mid-answer: the status line is gone already. Between two events of an event
                # stream, the answer can still follow on it (the caller takes over, or says what is known);
                # cut inside an event, the client gets a last event saying the outcome is unknown; a plain
                # body can only end short.
                if sse and upstream.status == 200 and tail == b"\n\n":
                    raise PeerLost(f"{owner}: {type(exc).__name__} mid-answer", stream=out) from None
                if sse:
                    # the reason names the owner's address: the log has it, the client the proxy's words
                    log.warning("peer.answer_cut", owner=owner, error=f"{type(exc).__name__}: {exc}")
                    error = jsonrpc.Error(request_id, outcome_unknown("its answer was cut off"))
                    await out.write(b"\n\n" + encode_event(jsonrpc.dumps(error).decode()))  # ends the cut one
            await out.write_eof()
            return out
