"""A lean HTTP/1.1 client for the hot upstream POSTs: pooled keep-alive connections on asyncio protocols.

Why: one small POST through aiohttp's `ClientSession.post` + `read` costs ~188 µs of CPU, on a plain
protocol with llhttp ~62-80 µs (bench/RESULTS.md). The POSTs of legacy Streamable HTTP sessions (every call,
every answer of a parked call's client) and every request to a modern upstream but the era probe go on it;
everything else (DELETE, GET streams resumed, probes, OAuth, peers, HTTP+SSE) stays on aiohttp.

One pool of idle connections per origin and SSL context, reused last-in first-out, closed after `idle_ttl`
and at once when the server closes one or sends anything while it is idle (lean_response.py). `IDLE_TTL` is
4 s, below the 5 s after which uvicorn (and so FastMCP and the SDKs' servers) and Node's http server close
an idle keep-alive connection: no request is written into a connection its server is closing that very
moment (the FIN crossing the request), which fails the request, never retried since it might have been
delivered. aiohttp's 15 s default left that window open for every call made 5 s after the one before.

Responses are framed by llhttp (wire/http1.py: Content-Length, chunked, until the close; interim 1xx
skipped; `Connection: close` honoured; Content-Length beside Transfer-Encoding refused). The request asks
for `Accept-Encoding: identity` and an answer with any other Content-Encoding is refused: the proxy never
decompresses, so no decompression bomb can reach it.

Failures: a connection that cannot be made raises `ConnectFailed` (nothing was sent: the request was
certainly not delivered); everything after raises a `LeanHttpError` (it may have been). A request is never
sent twice: a pooled connection that turns out closed fails its request, it is not retried on another.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Mapping

from proxy.upstream.base import UpstreamError
from proxy.upstream.lean_response import Connection, LeanHttpError, LeanResponse, PoolKey
from proxy.wire.http1 import MAX_HEAD, HttpError, Target, request_head, split_target

IDLE_TTL = 4.0  # seconds an idle connection is kept: below uvicorn's and Node's 5 s (the docstring)
# Set by the client itself: a caller's header of these names is not sent.
_OURS = frozenset({"host", "content-length", "transfer-encoding", "connection", "accept-encoding"})
# How the refusal of an encoded answer begins (said to the client as it is: calls/wording.py).
ENCODED = "upstream answered with Content-Encoding"
_MAX_TARGETS = 256  # parsed URLs kept (the configured upstreams'); more: forgotten and parsed again


class ConnectFailed(LeanHttpError):
    """No connection could be made (refused, no route, DNS, TLS verification): nothing was sent."""


class ConnectTimeout(LeanHttpError):
    """No connection within the connect timeout: nothing was sent."""


class HeadTimeout(LeanHttpError):
    """The server did not answer (no response head) within the head timeout; the connection is closed."""


class LeanClient:
    """Pooled keep-alive POSTs (see the module docstring). One per process; `close` at shutdown."""

    def __init__(self, *, idle_ttl: float = IDLE_TTL, max_head: int = MAX_HEAD) -> None:
        self._idle_ttl = idle_ttl
        self._max_head = max_head
        self._idle: dict[PoolKey, list[Connection]] = {}
        self._open: set[Connection] = set()
        self._targets: dict[str, Target] = {}
        self._sweep: asyncio.TimerHandle | None = None
        self._default_tls: ssl.SSLContext | None = None
        self._closed = False

    async def post(
        self,
        url: str,
        body: bytes,
        headers: Mapping[str, str],
        *,
        tls: ssl.SSLContext | None = None,
        connect_timeout: float,
        head_timeout: float | None = None,
    ) -> LeanResponse:
        """POST `body` to `url` and return the response once its head is in; the caller reads its body and
        then releases it (`keepalive.leave`) or closes it. `tls`: the upstream's SSL context for https
        (None: the system CAs, as aiohttp's default). Raises ConnectFailed or ConnectTimeout (not sent),
        HeadTimeout or another LeanHttpError (maybe delivered), UpstreamError for an encoded answer or a
        request that cannot be written."""
        if self._closed:
            raise ConnectFailed("the HTTP client is closed")
        target = self._target(url)
        request = self._request(target, body, headers)
        conn = self._idle_connection((target.origin, tls)) or await self._connect(
            target, tls, connect_timeout
        )
        response = self._write(conn, request)
        del request
        try:
            if head_timeout is None:
                await response._until_head()
            else:
                try:
                    async with asyncio.timeout(head_timeout):
                        await response._until_head()
                except TimeoutError:
                    raise HeadTimeout(f"no response head within {head_timeout:g}s") from None
            if (refusal := encoding_refused(response)) is not None:
                raise refusal
        except BaseException:  # cancelled (the client went away) included: the connection is not reused
            response.close()
            raise
        return response

    def send(
        self, url: str, body: bytes, headers: Mapping[str, str], *, tls: ssl.SSLContext | None = None
    ) -> LeanResponse | None:
        """`post` without waiting, on a connection already open: the request is written at once and the
        response returned before its head is in (`LeanResponse.watch` it; check `encoding_refused` once the
        head is in). None when no pooled connection is idle (or the client is closed): `post` it then, which
        connects. Raises UpstreamError for a request that cannot be written."""
        if self._closed:
            return None
        target = self._target(url)
        request = self._request(target, body, headers)
        conn = self._idle_connection((target.origin, tls))
        return None if conn is None else self._write(conn, request)

    @property
    def idle(self) -> int:
        """Connections in the pools, waiting for a request."""
        return sum(len(idle) for idle in self._idle.values())

    async def close(self) -> None:
        """Close every connection, idle or busy (their responses end with an error)."""
        self._closed = True
        if self._sweep is not None:
            self._sweep.cancel()
            self._sweep = None
        for conn in list(self._open):
            conn.close()
        self._idle.clear()

    # -- internals ----------------------------------------------------------------------------------------

    def _target(self, url: str) -> Target:
        target = self._targets.get(url)
        if target is None:
            target = split_target(url)
            if target is None:
                raise ConnectFailed(f"cannot POST to {url!r}")
            if len(self._targets) >= _MAX_TARGETS:
                self._targets.clear()
            self._targets[url] = target
        return target

    @staticmethod
    def _request(target: Target, body: bytes, headers: Mapping[str, str]) -> bytes:
        fields = [("User-Agent", "mrtr-proxy"), ("Accept-Encoding", "identity")]
        fields += [(name, value) for name, value in headers.items() if name.lower() not in _OURS]
        fields.append(("Content-Length", str(len(body))))
        try:
            return request_head(target.path, target.host, fields, "POST") + body
        except HttpError as exc:
            raise UpstreamError(f"the request cannot be sent: {exc}") from None

    def _write(self, conn: Connection, request: bytes) -> LeanResponse:
        response = LeanResponse(conn, self._give_back, self._max_head)
        conn.response = response
        assert conn.transport is not None  # `_idle_connection` and `_connect` return open connections
        conn.transport.write(request)
        return response

    def _idle_connection(self, key: PoolKey) -> Connection | None:
        idle = self._idle.get(key)
        if not idle:
            return None
        deadline = idle[-1].loop.time() - self._idle_ttl  # the connection's loop: no getpid (lean_response)
        while idle:
            conn = idle.pop()  # the most recently used: the likeliest to be open, the others expire
            if conn.open and conn.idle_since > deadline:
                return conn
            conn.close()
        return None

    async def _connect(self, target: Target, tls: ssl.SSLContext | None, timeout: float) -> Connection:
        conn = Connection((target.origin, tls), self._forget)
        context = (tls or self._default_context()) if target.secure else None
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout):
                await loop.create_connection(
                    lambda: conn,
                    target.hostname,
                    target.port,
                    ssl=context,
                    server_hostname=target.hostname if target.secure else None,
                )
        except TimeoutError:
            conn.close()
            raise ConnectTimeout(f"Connection timeout to host {target.origin}") from None
        except OSError as exc:  # refused, unreachable, DNS, and ssl.SSLError (a certificate not verified)
            conn.close()
            kind = "default" if target.secure and tls is None else ("custom" if target.secure else "none")
            raise ConnectFailed(f"Cannot connect to host {target.origin} ssl:{kind} [{exc}]") from None
        except BaseException:
            conn.close()
            raise
        if not conn.open:  # closed by the server at once (before its first byte could be read)
            raise ConnectFailed(f"Cannot connect to host {target.origin}: the connection closed at once")
        self._open.add(conn)
        return conn

    def _default_context(self) -> ssl.SSLContext:
        if self._default_tls is None:
            self._default_tls = ssl.create_default_context()
        return self._default_tls

    def _give_back(self, conn: Connection) -> None:
        """A response read to its end, on a connection that may carry the next request."""
        if self._closed:
            conn.close()
            return
        loop = conn.loop
        conn.idle_since = loop.time()
        self._idle.setdefault(conn.key, []).append(conn)
        if self._sweep is None:
            self._sweep = loop.call_later(self._idle_ttl, self._expire)

    def _forget(self, conn: Connection) -> None:
        self._open.discard(conn)
        idle = self._idle.get(conn.key)
        if idle is not None and conn in idle:
            idle.remove(conn)

    def _expire(self) -> None:
        """Close the connections idle for longer than the TTL; look again while any are idle."""
        self._sweep = None
        loop = asyncio.get_running_loop()
        deadline = loop.time() - self._idle_ttl
        for idle in self._idle.values():
            for conn in [c for c in idle if c.idle_since <= deadline]:
                conn.close()
        self._idle = {key: idle for key, idle in self._idle.items() if idle}
        if self._idle:
            self._sweep = loop.call_later(self._idle_ttl / 3, self._expire)


def encoding_refused(response: LeanResponse) -> UpstreamError | None:
    """The refusal of an answer with a Content-Encoding the proxy did not ask for (None: identity)."""
    coding = response.headers.get("content-encoding")
    if coding is None or coding.strip().lower() in ("", "identity"):
        return None
    return UpstreamError(
        f"{ENCODED} {coding[:40]!r}, which the proxy did not ask for (it sends "
        "Accept-Encoding identity); refused, nothing of it decoded"
    )


__all__ = [
    "ENCODED",
    "IDLE_TTL",
    "ConnectFailed",
    "ConnectTimeout",
    "HeadTimeout",
    "LeanClient",
    "encoding_refused",
]
