"""Forwarding a retry to the replica that holds its parked call, and relaying the answer unchanged.

The forwarded request stays authenticated by its own handle: the owner unseals and checks it as for any
retry, and never forwards again (its forward route is local-only), so a forwarding loop cannot happen.
"""

from __future__ import annotations

import aiohttp
from aiohttp import web

from proxy.upstream.propagation import with_propagated

FORWARD_PREFIX = "/_mrtr/forward"
FORWARDED_BY = "X-Mrtr-Forwarded-By"
# Not passed between replicas: connection-level, recomputed, or ours.
_SKIP_REQUEST = frozenset(
    {"host", "content-length", "connection", "keep-alive", "proxy-connection", "te", "trailer",
     "transfer-encoding", "upgrade", FORWARDED_BY.lower()}
)  # fmt: skip
_KEEP_RESPONSE = ("Content-Type", "Cache-Control", "X-Accel-Buffering", "Retry-After", "WWW-Authenticate")


class PeerUnreachable(Exception):
    """The owner replica could not be reached: nothing was delivered to it."""


class Peers:
    def __init__(self, http: aiohttp.ClientSession, self_address: str, connect_timeout: float = 2.0) -> None:
        self._http = http
        self._self = self_address
        self._timeout = aiohttp.ClientTimeout(total=None, sock_connect=connect_timeout)

    async def forward(self, owner: str, request: web.Request, body: bytes) -> web.StreamResponse:
        """Send the retry to `owner` and stream its answer back. Raises PeerUnreachable if the owner
        cannot be connected to (then nothing reached it, and the caller may take the call over)."""
        url = f"http://{owner}{FORWARD_PREFIX}{request.path}"
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _SKIP_REQUEST}
        headers = with_propagated(headers)  # the owner logs (and traces) it under the same request id
        headers[FORWARDED_BY] = self._self
        try:
            upstream = await self._http.post(url, data=body, headers=headers, timeout=self._timeout)
        except (aiohttp.ClientConnectorError, aiohttp.ServerDisconnectedError, TimeoutError) as exc:
            raise PeerUnreachable(f"{owner}: {type(exc).__name__}") from None
        async with upstream:
            out = web.StreamResponse(
                status=upstream.status,
                headers={k: upstream.headers[k] for k in _KEEP_RESPONSE if k in upstream.headers},
            )
            await out.prepare(request)
            async for chunk in upstream.content.iter_any():
                await out.write(chunk)
            await out.write_eof()
            return out
