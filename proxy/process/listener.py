"""The listener's own defences: a cap on connections and deadlines on reading requests (issue 14, slowloris).

aiohttp's server has an idle keep-alive timeout but nothing bounds how long a client may take to send a
request's headers or body, nor how many connections it may hold: a client trickling one byte a second keeps
a connection, and its buffers, forever. `ListenerGuard` wraps the protocol of every accepted connection and
tracks where the connection is:

- **headers**: from the connection's first byte (or its accept) until aiohttp has parsed a whole request
  head: at most `header_timeout_s`;
- **body**: from then until the request's body has been read to its end: at most `body_timeout_s`
  (a total, so a body trickled byte by byte is cut too);
- **handling**: the handler runs (a long SSE response included): no deadline here, the calls have theirs;
- **idle**: between requests on a keep-alive connection: at most `idle_timeout_s`, then the next request's
  first byte starts its header deadline.

A connection past its deadline is aborted (no lingering). At most `max_connections` connections per
listener: one more is answered `503` with a JSON-RPC error and closed at once. One sweep per `tick`
looks at every connection; the cost is a few attribute reads per connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, cast

import structlog
from aiohttp import web
from aiohttp.web_protocol import RequestHandler
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from proxy.calls.wording import too_many_connections
from proxy.wire import jsonrpc

log = structlog.get_logger(__name__)


_REFUSED = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nConnection: close\r\n"
    b"Retry-After: 1\r\nContent-Length: %d\r\n\r\n%s"
)


@dataclass(frozen=True, slots=True)
class ListenerLimits:
    header_timeout_s: float = 5.0
    body_timeout_s: float = 10.0
    idle_timeout_s: float = 15.0
    max_connections: int = 1024


@dataclass(slots=True, eq=False)
class _Conn:
    transport: asyncio.Transport
    site: str
    state: str  # "headers" | "body" | "handling" | "idle"
    since: float
    request: web.BaseRequest | None = None


@dataclass(slots=True)
class ListenerStats:
    """What the guard did since start (read by the metrics at scrape time)."""

    open: int = 0
    refused: int = 0
    cut: dict[str, int] = field(default_factory=lambda: {"headers": 0, "body": 0, "idle": 0})


class _Guarded(asyncio.Protocol):
    """Delegates every protocol callback to aiohttp's RequestHandler, telling the guard what it sees."""

    def __init__(self, guard: ListenerGuard, inner: RequestHandler, site: str) -> None:
        self._guard = guard
        self._inner = inner
        self._site = site

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport = cast(asyncio.Transport, transport)  # uvloop's transports do not subclass asyncio's
        if not self._guard.admit(self._inner, transport, self._site):
            return
        self._inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        conn = self._guard.conns.get(self._inner)
        if conn is None:
            return
        if conn.state == "idle":
            conn.state, conn.since = "headers", self._guard.clock()
        self._inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self._inner.eof_received()  # type: ignore[func-returns-value]

    def connection_lost(self, exc: Exception | None) -> None:
        if (conn := self._guard.conns.pop(self._inner, None)) is not None:
            self._guard.stats.open -= 1
            self._guard.per_site[conn.site] -= 1
            self._inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self._inner.pause_writing()

    def resume_writing(self) -> None:
        self._inner.resume_writing()


class ListenerGuard:
    """Deadlines for every connection, and a connection cap per listener (TCP site). One per app: the
    app's one middleware (front/fallback.py `JsonAnswers`, whose `watch` it is) tells it when each
    request's handling begins and ends (`began`, `ended`). See the module docstring."""

    def __init__(
        self, limits: ListenerLimits, *, tick: float = 0.25, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.limits = limits
        self.clock = clock
        self.conns: dict[RequestHandler, _Conn] = {}
        self.per_site: Counter[str] = Counter()
        self.stats = ListenerStats()
        self._tick = tick
        self._sweeper: asyncio.Task[None] | None = None

    def protocol_factory(
        self, server: Callable[[], RequestHandler], site: str
    ) -> Callable[[], asyncio.Protocol]:
        return lambda: _Guarded(self, server(), site)

    def admit(self, inner: RequestHandler, transport: asyncio.Transport, site: str) -> bool:
        if self.per_site[site] >= self.limits.max_connections:
            self.stats.refused += 1
            body = jsonrpc.dumps(jsonrpc.Error(None, too_many_connections(self.limits.max_connections)))
            with contextlib.suppress(Exception):
                transport.write(_REFUSED % (len(body), body))
            transport.close()
            return False
        self.conns[inner] = _Conn(transport, site, "headers", self.clock())
        self.per_site[site] += 1
        self.stats.open += 1
        if self._sweeper is None:
            self._sweeper = asyncio.get_running_loop().create_task(self._sweep(), name="listener-guard")
        return True

    def began(self, request: web.BaseRequest) -> _Conn | None:
        """Once aiohttp has parsed a request head: the head arrived; now the body's deadline runs. None: a
        connection another guard (or a test server) accepted."""
        conn = self.conns.get(request.protocol)
        if conn is not None:
            conn.state, conn.since, conn.request = "body", self.clock(), request
        return conn

    def ended(self, token: object) -> None:
        """The request was answered: its connection is idle until the next one's head begins."""
        conn = cast(_Conn, token)
        conn.state, conn.since, conn.request = "idle", self.clock(), None

    def sweep(self) -> int:
        """Abort every connection past its deadline; returns how many."""
        now, limits, cut = self.clock(), self.limits, 0
        for conn in list(self.conns.values()):
            if conn.state == "body" and conn.request is not None and conn.request.content.is_eof():
                conn.state = "handling"
            limit = {
                "headers": limits.header_timeout_s,
                "body": limits.body_timeout_s,
                "idle": limits.idle_timeout_s,
            }.get(conn.state)
            if limit is not None and limit > 0 and now - conn.since > limit:
                self.stats.cut[conn.state] += 1
                conn.state = "cut"
                conn.transport.abort()
                cut += 1
        if cut:
            log.info("listener.cut", connections=cut, open=len(self.conns))
        return cut

    async def _sweep(self) -> None:
        while True:
            await asyncio.sleep(self._tick)
            try:
                self.sweep()
            except Exception:  # pragma: no cover - a bug here must not stop the sweeping
                log.exception("listener.sweep_failed")

    async def close(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
            self._sweeper = None


# Connections the kernel holds for the proxy to accept (capped by net.core.somaxconn). aiohttp's 128 let a
# burst of ~1,000 connects on a busy machine overflow the queue: a client then saw its connection reset
# before the proxy ever accepted it (tests/e2e/test_slowloris.py). 2048, as uvicorn and gunicorn default.
LISTEN_BACKLOG = 2048


class GuardedSite(web.TCPSite):
    """A TCP site whose connections go through a `ListenerGuard`."""

    def __init__(self, runner: web.BaseRunner, host: str, port: int, guard: ListenerGuard) -> None:
        super().__init__(runner, host, port, backlog=LISTEN_BACKLOG)
        self._guard = guard

    async def start(self) -> None:
        # BaseSite.start registers the site; TCPSite.start would bind with the bare aiohttp protocol.
        await web.BaseSite.start(self)
        server = self._runner.server
        assert server is not None
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            self._guard.protocol_factory(server, f"{self._host}:{self._port}"),
            self._host,
            self._port,
            backlog=self._backlog,
            reuse_address=self._reuse_address,
            reuse_port=self._reuse_port,
        )
        sockets: Any = self._server.sockets
        self._bound_port = sockets[0].getsockname()[1] if sockets else self._port


class ListenerCollector(Collector):
    """Connections open, refused over front.max_connections, and cut at a deadline (by phase)."""

    def __init__(self, stats: ListenerStats) -> None:  # registered on the app's registry by startup.py
        self._stats = stats

    def collect(self) -> Iterable[Metric]:
        open_ = GaugeMetricFamily("mrtr_proxy_connections_open", "Client connections open (all listeners)")
        open_.add_metric([], self._stats.open)
        refused = CounterMetricFamily(
            "mrtr_proxy_connections_refused",
            "Connections refused because front.max_connections were open",
        )
        refused.add_metric([], self._stats.refused)
        cut = CounterMetricFamily(
            "mrtr_proxy_connections_cut",
            "Connections cut at a listener deadline: headers (front.header_timeout_s), body "
            "(front.body_timeout_s) or idle (front.idle_timeout_s)",
            labels=["phase"],
        )
        for phase, count in sorted(self._stats.cut.items()):
            cut.add_metric([phase], count)
        return [open_, refused, cut]
