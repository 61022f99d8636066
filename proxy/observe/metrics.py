"""Prometheus metrics: one `CollectorRegistry` per app, served at `GET /metrics`.

Request metrics come from the front's canonical log line (`record_request`, called once per request right
after the line is written), so the log and the metrics cannot disagree. The call service reports what no
request line shows (a parked call resumed or reaped, a takeover) through its observer, which `Metrics` is.
Gauges (calls, sessions) are read from the call registry and the pools at scrape time.

Every label value comes from a fixed set (methods, outcome classes, rejection reasons, configured upstream
and tool names); anything else is counted as "other", so label cardinality is bounded whatever clients send.
"""

from __future__ import annotations

import time
from collections import Counter as Tally
from collections.abc import Callable, Iterable, Mapping
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, Final, TypeVar

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.registry import Collector

from proxy.wire import jsonrpc, mcp

# The call registry's refusal reasons (proxy/calls/registry.py REFUSAL_REASONS; not imported: metrics sit
# below the calls layer).
REFUSAL_REASONS: Final = ("calls_total", "principal_share", "address_share", "parked_share", "pool_full")

if TYPE_CHECKING:
    from proxy.calls.registry import CallRegistry
    from proxy.upstream.pool import SessionPool

_Instrument = TypeVar("_Instrument", bound=MetricWrapperBase)

CONTENT_TYPE: Final = "text/plain; version=0.0.4; charset=utf-8"
OTHER: Final = "other"
NONE: Final = "none"  # the request never got as far as naming a method / an upstream

METHODS: Final = frozenset(
    {
        "ping",
        "server/discover",
        "initialize",
        mcp.LISTEN,
        *mcp.MRTR_METHODS,
        *mcp.FORWARDED_METHODS,
        *mcp.TASK_METHODS,
    }
)
# The canonical line's outcome is "<class>" or "<class>:<detail>"; the class is the label.
OUTCOME_CLASSES: Final[Mapping[str, str]] = {
    "complete": "complete",
    "input_required": "input_required",
    "upstream_error": "upstream_error",  # the upstream's own JSON-RPC error, passed through
    "failed": "failed",  # ours: upstream failed or timed out, call lost, limits, bad inputResponses
    "upstream_failed": "failed",  # the same, for discover and relayed lists
    "refused": "refused",  # refused at the boundary (bad headers or body, origin, rate, draining)
    "method_not_allowed": "refused",
    "unknown_method": "unknown_method",
    "handle_rejected": "handle_rejected",
    "forwarded": "forwarded",  # relayed to the replica that owns the parked call
    "accepted": "accepted",  # a notification
    "relayed": "relayed",  # a legacy client's request, relayed as it is
    "task": "task",  # the call became a task (Tasks extension)
    "task_not_found": "task_not_found",
    "client_closed": "client_closed",  # a listen stream the client ended
    "upstream_lost": "failed",  # a listen stream whose upstream session died
    "backlog_overflow": "failed",  # a listen stream whose client could not keep up
}
# HandleError reasons (handle/) and InvalidRequestState reasons (calls/outcomes.py).
REJECTION_REASONS: Final = frozenset(
    {
        "too_short", "too_long", "malformed", "unknown_version", "unknown_key", "auth_failed",
        "bad_claims", "expired", "not_yet_valid", "wrong_upstream", "wrong_principal", "wrong_target",
        "call_ended", "round_in_progress", "bad_pending_keys", "stale_round", "call_mismatch",
        "not_owner",
    }
)  # fmt: skip
UPSTREAM_ERROR_KINDS: Final = ("error_response", "failed", "timeout")  # what upstream_error_kind answers
# Seconds: a ping (sub-millisecond) up to a long tool call (calls.call_timeout_s defaults to 300).
DURATION_BUCKETS: Final = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300,
)  # fmt: skip
# Seconds a client took to come back to a parked call (calls.parked_ttl_s defaults to 600).
PARKED_AGE_BUCKETS: Final = (0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)


def method_label(method: object) -> str:
    if method is None:
        return NONE
    if method in METHODS:
        return str(method)
    if isinstance(method, str) and method.startswith("notifications/"):
        return "notification"
    return OTHER


def outcome_class(outcome: object) -> str:
    if outcome is None:
        return NONE
    return OUTCOME_CLASSES.get(str(outcome).split(":", 1)[0], OTHER)


def rejection_reason(reason: object) -> str:
    return str(reason) if reason in REJECTION_REASONS else OTHER


def upstream_error_kind(outcome: object) -> str | None:
    """What the upstream did wrong, if the line's outcome blames it: `error_response` (a JSON-RPC error of
    its own), `timeout` (silent for calls.call_timeout_s) or `failed` (unreachable, or failed mid-call)."""
    text = str(outcome)
    if text.startswith("upstream_error:"):
        return "error_response"
    if text == f"failed:{jsonrpc.UPSTREAM_TIMEOUT}":
        return "timeout"
    if text in ("upstream_failed", f"failed:{jsonrpc.UPSTREAM_FAILED}"):
        return "failed"
    return None


class Metrics:
    """The instruments of one app. Also the call service's observer (`resumed`, `reaped`, `taken_over`)."""

    def __init__(self, upstreams: Iterable[str], tools: Iterable[str] = ()) -> None:
        self.registry = CollectorRegistry()
        self._upstreams = tuple(upstreams)
        self._tools = frozenset(tools)  # metrics.tools: the only tool names that become label values
        known = [(name,) for name in self._upstreams]  # known series start at 0: rate() and absence alerts
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
            start=[(name, kind) for name in self._upstreams for kind in UPSTREAM_ERROR_KINDS],
        )
        self.peer_forwards = self._add(
            Counter,
            "mrtr_proxy_peer_forwards",
            "Retries sent on to the replica that owns their parked call, by result",
            ("result",),
            start=[("ok",), ("unreachable",), ("lost",)],
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
        self._state = _StateCollector(self._upstreams)
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
    ) -> None:
        """Read the call and session gauges from these at scrape time (set once the app has started)."""
        self._state.calls, self._state.pools = calls, pools
        self._state.saturation = saturation

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

    def observe_request(self, line: Mapping[str, Any]) -> None:
        """Count one request from its canonical log line."""
        method = method_label(line.get("method"))
        upstream = self.upstream_label(line.get("upstream"))
        outcome = line.get("outcome")
        self.requests.labels(method, outcome_class(outcome), upstream).inc()
        if method == "tools/call":
            tool = line["tool"] if line.get("tool") in self._tools else OTHER
            self.tool_calls.labels(upstream, tool, outcome_class(outcome)).inc()
        duration_ms = line.get("duration_ms")
        if isinstance(duration_ms, int | float):
            self.duration.labels(method, upstream).observe(duration_ms / 1000)
        if outcome == "input_required":
            self.rounds.labels(upstream).inc()
        elif outcome == "handle_rejected" or line.get("reason") == "unknown_key":  # the latter: a 503
            self.rejections.labels(rejection_reason(line.get("reason"))).inc()
        if (kind := upstream_error_kind(outcome)) is not None:
            self.upstream_errors.labels(upstream, kind).inc()
        if "owner" in line:  # the retry was for a call parked on another replica
            result = (
                "unreachable" if "owner_unreachable" in line else "lost" if "owner_lost" in line else "ok"
            )
            self.peer_forwards.labels(result).inc()

    # -- the call service's observer ----------------------------------------------------------------------

    def resumed(self, upstream: str, parked_for: float) -> None:
        self.parked_age.labels(self.upstream_label(upstream), "resumed").observe(parked_for)

    def reaped(self, upstream: str, parked_for: float) -> None:
        label = self.upstream_label(upstream)
        self.reaped_calls.labels(label).inc()
        self.parked_age.labels(label, "reaped").observe(parked_for)

    def taken_over(self, upstream: str, *, ok: bool) -> None:
        self.takeovers.labels("ok" if ok else "lost").inc()

    def render(self, *, public: bool = False) -> bytes:
        """`public` (the main and peer ports): the handle rejections without their reason label."""
        view = SimpleNamespace(collect=lambda: map(_without_reasons, self.registry.collect()))
        return generate_latest(view if public else self.registry)


def _without_reasons(metric: Metric) -> Metric:
    """The wire gives every refused handle one error: the public /metrics must not tell which check failed."""
    if metric.name != "mrtr_proxy_handle_rejections":
        return metric
    total = sum(s.value for s in metric.samples if s.name.endswith("_total"))
    return CounterMetricFamily(metric.name, "requestState handles refused (reasons: admin /metrics)", total)


class _StateCollector(Collector):
    """Gauges computed at scrape time: running and parked calls, and open sessions, per upstream."""

    def __init__(self, upstreams: tuple[str, ...]) -> None:
        self._upstreams = upstreams
        self.calls: CallRegistry | None = None
        self.pools: Mapping[str, SessionPool] = {}
        self.max_calls: int | None = None
        self.max_sessions: Mapping[str, int] = {}
        self.drain_grace_s: float | None = None
        self.draining_since: float | None = None
        self.saturation: Callable[[], Mapping[str, str]] | None = None

    def collect(self) -> Iterable[Metric]:
        parked = GaugeMetricFamily(
            "mrtr_proxy_parked_calls", "Calls parked, waiting for the client's retry", labels=["upstream"]
        )
        running = GaugeMetricFamily(
            "mrtr_proxy_running_calls", "Calls a request is driving right now", labels=["upstream"]
        )
        sessions = GaugeMetricFamily(
            "mrtr_proxy_upstream_sessions",
            "Legacy sessions open (idle, busy or opening)",
            labels=["upstream"],
        )
        counts: Tally[tuple[str, bool]] = Tally(
            (call.upstream, call.parked) for call in (self.calls if self.calls is not None else ())
        )
        for name in self._upstreams:
            parked.add_metric([name], counts[name, True])
            running.add_metric([name], counts[name, False])
            pool = self.pools.get(name)
            sessions.add_metric([name], pool.size if pool is not None else 0)
        return [parked, running, sessions, *self._admission(), *self._limits()]

    def _admission(self) -> Iterable[Metric]:
        full = self.saturation() if self.saturation is not None else {}
        saturated = GaugeMetricFamily(
            "mrtr_proxy_saturated",
            "1 while this replica is full (calls, parked share or sessions at their caps; /readyz says "
            "saturated), else 0",
        )
        saturated.add_metric([], 1 if full else 0)
        yield saturated
        refusals = CounterMetricFamily(
            "mrtr_proxy_admission_refusals",
            "Calls and requests refused by a limit: calls_total, principal_share, address_share, "
            "parked_share, pool_full",
            labels=["reason"],
        )
        counted = self.calls.refusals if self.calls is not None else Tally[str]()
        for reason in REFUSAL_REASONS:
            refusals.add_metric([reason], counted[reason])
        yield refusals

    def _limits(self) -> Iterable[Metric]:
        since = self.draining_since
        draining = GaugeMetricFamily(
            "mrtr_proxy_draining_seconds",
            "Seconds since SIGTERM started this replica's drain (0 while it is not draining)",
            value=0.0 if since is None else time.monotonic() - since,
        )
        yield draining
        if self.drain_grace_s is not None:
            yield GaugeMetricFamily(
                "mrtr_proxy_drain_grace_seconds", "calls.drain_grace_s", value=self.drain_grace_s
            )
        if self.max_calls is not None:
            yield GaugeMetricFamily(
                "mrtr_proxy_max_calls",
                "calls.max_parked: calls held (running or parked) at most",
                value=self.max_calls,
            )
        if self.max_sessions:
            limit = GaugeMetricFamily(
                "mrtr_proxy_upstream_max_sessions",
                "pool.max_sessions: legacy sessions open at once to this upstream at most",
                labels=["upstream"],
            )
            for name in self._upstreams:
                if name in self.max_sessions:
                    limit.add_metric([name], self.max_sessions[name])
            yield limit

    def describe(self) -> Iterable[Metric]:
        gauges = ("mrtr_proxy_parked_calls", "mrtr_proxy_running_calls", "mrtr_proxy_upstream_sessions")
        return [
            *(GaugeMetricFamily(name, "", labels=["upstream"]) for name in gauges),
            GaugeMetricFamily("mrtr_proxy_saturated", ""),
            CounterMetricFamily("mrtr_proxy_admission_refusals", "", labels=["reason"]),
        ]


METRICS = web.AppKey("metrics", Metrics)


def record_request(app: web.Application, line: Mapping[str, Any]) -> None:
    """Count one request from its canonical log line (nothing when the app has no metrics)."""
    metrics = app.get(METRICS)
    if metrics is not None:
        metrics.observe_request(line)


async def metrics_endpoint(request: web.Request) -> web.Response:
    """`GET /metrics` on the main and peer ports: no handle rejection reasons (the admin port has them)."""
    return web.Response(body=request.app[METRICS].render(public=True), headers={"Content-Type": CONTENT_TYPE})
