"""Prometheus metrics: one `CollectorRegistry` per app, served at `GET /metrics`.

Request metrics come from the front's canonical log line (`record_request`, called once per request right
after the line is written), so the log and the metrics cannot disagree. The call service reports what no
request line shows (a parked call resumed or reaped, a takeover) through its observer, which `Metrics` is.
Gauges (calls, sessions) are read from the call registry and the pools at scrape time (gauges.py). Every
label value comes from a fixed set (labels.py), so label cardinality is bounded whatever clients send.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Callable, Iterable, Mapping
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, Final, TypeVar

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.metrics import MetricWrapperBase

from proxy.observe.gauges import StateCollector
from proxy.observe.labels import (
    NONE,
    OTHER,
    REJECTION_REASONS,
    UPSTREAM_ERROR_KINDS,
    method_label,
    outcome_class,
    rejection_reason,
    upstream_error_kind,
)
from proxy.observe.line import Detail, Outcome, RequestLine

if TYPE_CHECKING:
    from proxy.calls.registry import CallRegistry
    from proxy.upstream.pool import SessionPool

_Instrument = TypeVar("_Instrument", bound=MetricWrapperBase)

CONTENT_TYPE: Final = "text/plain; version=0.0.4; charset=utf-8"
# Seconds: a ping (sub-millisecond) up to a long tool call (calls.call_timeout_s defaults to 300).
DURATION_BUCKETS: Final = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300,
)  # fmt: skip
# Seconds a client took to come back to a parked call (calls.parked_ttl_s defaults to 600).
PARKED_AGE_BUCKETS: Final = (0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)
# A forwarded retry's line says what became of the forward; else it was answered by the owner ("ok").
_FORWARD_RESULTS: Final = (
    ("owner_unreachable", "unreachable"),  # nothing reached the owner: taken over here, or lost
    ("owner_lost", "lost"),  # the owner took it and went away: taken over, or the outcome is unknown
    ("owner_refused", "refused"),  # a replica with other keys at the owner's address: the call is lost
)


LEFT_OUT_REASONS: Final = frozenset({"timeout", "unavailable", "pool_full"})
MAX_SERIES_KEYS: Final = 4096  # distinct (method, upstream, outcome, detail, tool) of lines kept


class _Series:
    """The children of the instruments one kind of request line counts in (None: that instrument is not),
    and what such lines counted since the last scrape, as plain numbers: a line adds to these (no lock, no
    loop over the buckets), `flush` hands them to the children when /metrics is rendered."""

    __slots__ = (
        "buckets", "duration", "kept", "lines", "requests", "rounds", "seconds",
        "tool_calls", "upstream_errors",
    )  # fmt: skip

    def __init__(
        self,
        requests: Counter,
        tool_calls: Counter | None,
        duration: Histogram,
        rounds: Counter | None,
        upstream_errors: Counter | None,
    ) -> None:
        self.requests, self.tool_calls, self.duration = requests, tool_calls, duration
        self.rounds, self.upstream_errors = rounds, upstream_errors
        self.kept = True  # in Metrics._series, so flushed at each scrape
        self.lines = 0
        self.seconds = 0.0
        self.buckets = [0] * (len(DURATION_BUCKETS) + 1)  # the last: +Inf

    def flush(self) -> None:
        lines, self.lines = self.lines, 0
        if lines:
            for counter in (self.requests, self.tool_calls, self.rounds, self.upstream_errors):
                if counter is not None:
                    counter.inc(lines)
        if any(self.buckets):  # Histogram.observe's effect, summed: its sum, and each bucket's count
            self.duration._sum.inc(self.seconds)
            for bucket, count in zip(self.duration._buckets, self.buckets, strict=True):
                if count:
                    bucket.inc(count)
            self.seconds, self.buckets = 0.0, [0] * len(self.buckets)


class Metrics:
    """The instruments of one app. Also the call service's observer (`resumed`, `reaped`, `taken_over`)."""

    def __init__(
        self,
        upstreams: Iterable[str],
        tools: Iterable[str] = (),
    ) -> None:
        self.registry = CollectorRegistry()
        names = tuple(upstreams)
        self._upstreams = names
        self._tools = frozenset(tools)  # metrics.tools: the only tool names that become label values
        self._series: dict[tuple[object, ...], _Series] = {}  # see _series_of
        self._resumed_age: dict[str, Histogram] = {}  # upstream -> its child, looked up once (resumed)
        known = [(name,) for name in names]  # known series start at 0: rate() and absence alerts
        self.requests = self._add(
            Counter,
            "mrtr_proxy_requests",
            "Requests answered, by JSON-RPC method, outcome class and upstream",
            ("method", "outcome", "upstream"),
        )
        self.duration = self._add(
            Histogram,
            "mrtr_proxy_request_duration_seconds",
            "Time to answer a request, by JSON-RPC method and upstream",
            ("method", "upstream"),
            buckets=DURATION_BUCKETS,
        )
        self.rounds = self._add(
            Counter,
            "mrtr_proxy_input_required_rounds",
            "input_required results sent (each parks a call until the client's retry)",
            ("upstream",),
            start=known,
        )
        self.parked_age = self._add(
            Histogram,
            "mrtr_proxy_parked_call_age_seconds",
            "How long a call stayed parked before its retry took it (end=resumed) or it was reaped",
            ("upstream", "end"),
            buckets=PARKED_AGE_BUCKETS,
        )
        self.rejections = self._add(
            Counter,
            "mrtr_proxy_handle_rejections",
            "requestState handles refused (all get the same wire error), by reason",
            ("reason",),
            start=[(reason,) for reason in sorted(REJECTION_REASONS)],
        )
        self.upstream_errors = self._add(
            Counter,
            "mrtr_proxy_upstream_errors",
            "Requests the upstream failed: error_response, failed (unreachable or mid-call) or timeout",
            ("upstream", "kind"),
            start=[(name, kind) for name in names for kind in UPSTREAM_ERROR_KINDS],
        )
        self.peer_forwards = self._add(
            Counter,
            "mrtr_proxy_peer_forwards",
            "Retries sent on to the replica that owns their parked call, by result",
            ("result",),
            start=[("ok",), ("unreachable",), ("lost",), ("refused",)],
        )
        self.takeovers = self._add(
            Counter,
            "mrtr_proxy_takeovers",
            "Parked calls of a gone replica taken over (ok) or reported lost (never re-run)",
            ("result",),
            start=[("ok",), ("lost",)],
        )
        self.reaped_calls = self._add(
            Counter,
            "mrtr_proxy_reaped_calls",
            "Parked calls cancelled because the client did not retry within calls.parked_ttl_s",
            ("upstream",),
            start=known,
        )
        self.tool_calls = self._add(
            Counter,
            "mrtr_proxy_tool_calls",
            'tools/call requests by upstream, tool (metrics.tools; any other is "other") and outcome class',
            ("upstream", "tool", "outcome"),
        )
        self.route_left_out = self._add(
            Counter,
            "mrtr_proxy_route_left_out",
            "Upstreams left out of an aggregated route's list or discover (down, slow, an error), by reason",
            ("route", "upstream", "reason"),
        )
        self._state = StateCollector(names)
        self.registry.register(self._state)

    def _add(
        self,
        kind: type[_Instrument],
        name: str,
        documentation: str,
        labels: tuple[str, ...],
        *,
        start: Iterable[tuple[str, ...]] = (),
        **options: Any,
    ) -> _Instrument:
        """Register one instrument on this app's registry; the label values in `start` begin at 0."""
        instrument = kind(name, documentation, labels, registry=self.registry, **options)
        for values in start:
            instrument.labels(*values)
        return instrument

    def watch(
        self,
        calls: CallRegistry,
        pools: Mapping[str, SessionPool],
        saturation: Callable[[], Mapping[str, str]] | None = None,
        eras: Callable[[], Mapping[str, str]] | None = None,
        learned: Callable[[], Mapping[str, Mapping[str, list[str]]]] | None = None,
    ) -> None:
        """Read the call and session gauges from these at scrape time (set once the app has started), each
        upstream's era (upstream/era.py) and the tools whose path was learned (upstream/tool_paths.py)."""
        self._state.calls, self._state.pools = calls, pools
        self._state.saturation, self._state.eras, self._state.learned = saturation, eras, learned

    def limits(self, *, max_calls: int, max_sessions: Mapping[str, int], drain_grace_s: float) -> None:
        """The configured limits, exported as gauges so alerts compare against them (calls.max_parked,
        pool.max_sessions per upstream, calls.drain_grace_s)."""
        self._state.max_calls, self._state.max_sessions = max_calls, dict(max_sessions)
        self._state.drain_grace_s = drain_grace_s

    def drain_started(self) -> None:
        """SIGTERM: from now on `mrtr_proxy_draining_seconds` counts up."""
        self._state.draining_since = time.monotonic()

    def upstream_label(self, name: object) -> str:
        if name is None:
            return NONE
        return str(name) if name in self._upstreams else OTHER

    def observe_request(self, line: RequestLine) -> None:
        """Count one request from its canonical log line."""
        outcome = line.outcome
        series = self._series_of(line.method, line.upstream, outcome, line.detail, line.tool)
        series.lines += 1  # requests, tool calls, rounds, upstream errors: whichever the series counts
        duration_ms = line.duration_ms
        if duration_ms is not None:  # the front's own figure: finite
            seconds = duration_ms / 1000
            series.seconds += seconds
            series.buckets[bisect.bisect_left(DURATION_BUCKETS, seconds)] += 1  # the first bound >= it
        if series.rounds is None and (outcome is Outcome.HANDLE_REJECTED or line.reason == "unknown_key"):
            self.rejections.labels(rejection_reason(line.reason)).inc()  # the latter: a 503
        if not series.kept:  # past MAX_SERIES_KEYS (see _series_of): counted now, or never
            series.flush()
        if line.owner is not None:  # the retry was for a call parked on another replica
            result = next(
                (result for key, result in _FORWARD_RESULTS if getattr(line, key) is not None), "ok"
            )
            self.peer_forwards.labels(result).inc()

    def _series_of(
        self,
        method: str | None,
        upstream: str | None,
        outcome: Outcome | None,
        detail: Detail | None,
        tool: str | None,
    ) -> _Series:
        """The children a line with these values counts in, their labels worked out and looked up once for
        each such line (up to MAX_SERIES_KEYS of them: the values are the client's, the labels are not)."""
        key = (method, upstream, outcome, detail, tool)  # as the front writes them
        series = self._series.get(key)
        if series is None:
            series = self._bind(method_label(method), self.upstream_label(upstream), outcome, detail, tool)
            if len(self._series) < MAX_SERIES_KEYS:
                self._series[key] = series
            else:
                series.kept = False
        return series

    def _flush(self) -> None:
        """The request lines' counts since the last scrape, into their instruments' children."""
        for series in self._series.values():
            series.flush()

    def _bind(
        self, method: str, upstream: str, outcome: Outcome | None, detail: Detail | None, tool: str | None
    ) -> _Series:
        klass = outcome_class(outcome)
        kind = upstream_error_kind(outcome, detail)
        tool_calls = None
        if method == "tools/call":
            tool_calls = self.tool_calls.labels(upstream, str(tool) if tool in self._tools else OTHER, klass)
        return _Series(
            requests=self.requests.labels(method, klass, upstream),
            tool_calls=tool_calls,
            duration=self.duration.labels(method, upstream),
            rounds=self.rounds.labels(upstream) if outcome is Outcome.INPUT_REQUIRED else None,
            upstream_errors=None if kind is None else self.upstream_errors.labels(upstream, kind),
        )

    def route_members(self, routes: Mapping[str, tuple[str, ...]]) -> None:
        """The aggregated routes (name -> its upstreams): a route's own answers (its lists) are counted
        under its name as `upstream`, and its left-out series start at 0."""
        self._upstreams = (*self._upstreams, *routes)
        self._flush()
        self._series.clear()  # their upstream label was "other"
        self._resumed_age.clear()
        for route, ups in routes.items():
            for up in ups:
                self.route_left_out.labels(route, up, "unavailable")

    def left_out(self, route: str, upstream: str, why: str) -> None:
        """An aggregated route's list went on without `upstream` (proxy/front/modern/aggregate/lists.py)."""
        reason = why if why in LEFT_OUT_REASONS else "error" if why.startswith("error:") else OTHER
        self.route_left_out.labels(route, upstream, reason).inc()

    # -- the call service's observer ----------------------------------------------------------------------

    def resumed(self, upstream: str, parked_for: float) -> None:
        """Once per MRTR retry: its child looked up once per upstream, not by `labels()` each time."""
        child = self._resumed_age.get(upstream)
        if child is None:
            child = self.parked_age.labels(self.upstream_label(upstream), "resumed")
            if len(self._resumed_age) < MAX_SERIES_KEYS:
                self._resumed_age[upstream] = child
        child.observe(parked_for)

    def reaped(self, upstream: str, parked_for: float) -> None:
        label = self.upstream_label(upstream)
        self.reaped_calls.labels(label).inc()
        self.parked_age.labels(label, "reaped").observe(parked_for)

    def taken_over(self, upstream: str, *, ok: bool) -> None:
        self.takeovers.labels("ok" if ok else "lost").inc()

    def render(self, *, public: bool = False) -> bytes:
        """`public` (the main and peer ports): the handle rejections without their reason label. Neither
        has prometheus_client's `<name>_created` series (see `_without_created`)."""
        self._flush()
        keep = _without_reasons if public else _same
        view = SimpleNamespace(collect=lambda: (_without_created(keep(m)) for m in self.registry.collect()))
        return generate_latest(view)


def _same(metric: Metric) -> Metric:
    return metric


def _without_created(metric: Metric) -> Metric:
    """Without the `<name>_created` sample prometheus_client adds to each counter and histogram series (the
    Unix time the series was made): no alert, rule or dashboard reads it, it nearly doubled the
    series, and only one port had it for the handle rejections. Left out on every port alike."""
    if metric.type not in ("counter", "histogram", "summary"):
        return metric
    plain = Metric(metric.name, metric.documentation, metric.type, metric.unit)
    plain.samples = [s for s in metric.samples if not s.name.endswith("_created")]
    return plain


def _without_reasons(metric: Metric) -> Metric:
    """The wire gives every refused handle one error: the public /metrics must not tell which check failed."""
    if metric.name != "mrtr_proxy_handle_rejections":
        return metric
    total = sum(s.value for s in metric.samples if s.name.endswith("_total"))
    return CounterMetricFamily(metric.name, "requestState handles refused (reasons: admin /metrics)", total)


METRICS = web.AppKey("metrics", Metrics)


def record_request(app: web.Application, line: RequestLine) -> None:
    """Count one request from its canonical log line (nothing when the app has no metrics)."""
    metrics = app.get(METRICS)
    if metrics is not None:
        metrics.observe_request(line)


async def metrics_endpoint(request: web.Request) -> web.Response:
    """`GET /metrics` on the main and peer ports: no handle rejection reasons (the admin port has them)."""
    return web.Response(body=request.app[METRICS].render(public=True), headers={"Content-Type": CONTENT_TYPE})
