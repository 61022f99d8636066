"""Gauges computed at scrape time from the call registry and the pools (running and parked calls, sessions,
saturation, the configured limits), and the admission refusals the registry counted."""

from __future__ import annotations

import time
from collections import Counter as Tally
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Final

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from proxy.calls.registry import CallRegistry
    from proxy.upstream.pool import SessionPool

# The call registry's refusal reasons (proxy/calls/registry.py REFUSAL_REASONS; not imported: metrics sit
# below the calls layer).
ERAS: Final = ("legacy", "modern", "both", "unknown")
REFUSAL_REASONS: Final = (
    "calls_total",
    "principal_share",
    "address_share",
    "parked_share",
    "fair_share",
    "pool_full",
)


class StateCollector(Collector):
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
        self.eras: Callable[[], Mapping[str, str]] | None = (
            None  # upstream/era.py: legacy, modern, both, unknown
        )
        # upstream/tool_paths.py: the tools learned per upstream, {"legacy": [...], "native": [...]}
        self.learned: Callable[[], Mapping[str, Mapping[str, list[str]]]] | None = None

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
        return [parked, running, sessions, self._eras(), self._learned(), *self._admission(), *self._limits()]

    def _learned(self) -> Metric:
        learned = GaugeMetricFamily(
            "mrtr_proxy_learned_tool",
            "1 for each tool of a two-era upstream this replica learned the path of (legacy: it asks inline; "
            "native: it asks only the 2026-07-28 way)",
            labels=["upstream", "tool", "path"],
        )
        known = self.learned() if self.learned is not None else {}
        for name, paths in known.items():
            for path, tools in paths.items():
                for tool in tools:
                    learned.add_metric([name, tool, path], 1)
        return learned

    def _eras(self) -> Metric:
        era = GaugeMetricFamily(
            "mrtr_proxy_upstream_era",
            "1 for each upstream's protocol era (legacy, modern, both; unknown until probed), 0 for others",
            labels=["upstream", "era"],
        )
        known = self.eras() if self.eras is not None else {}
        for name in self._upstreams:
            for value in ERAS:
                era.add_metric([name, value], 1 if known.get(name, "unknown") == value else 0)
        return era

    def _admission(self) -> Iterable[Metric]:
        full = self.saturation() if self.saturation is not None else {}
        saturated = GaugeMetricFamily(
            "mrtr_proxy_saturated",
            "1 while this replica is full (calls, parked share or sessions at their caps; /readyz lists "
            "what under saturated, and stays ready), else 0",
        )
        saturated.add_metric([], 1 if full else 0)
        yield saturated
        what = GaugeMetricFamily(
            "mrtr_proxy_saturated_by",
            "1 for each upstream (or replica) and what of it is full: calls, parked_calls, sessions",
            labels=["scope", "reason"],
        )
        for scope, reason in sorted(full.items()):
            what.add_metric([scope, reason], 1)
        yield what
        refusals = CounterMetricFamily(
            "mrtr_proxy_admission_refusals",
            "Calls and requests refused by a limit: calls_total, principal_share, address_share, "
            "parked_share, fair_share, pool_full",
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
            GaugeMetricFamily("mrtr_proxy_upstream_era", "", labels=["upstream", "era"]),
            GaugeMetricFamily("mrtr_proxy_learned_tool", "", labels=["upstream", "tool", "path"]),
            GaugeMetricFamily("mrtr_proxy_saturated_by", "", labels=["scope", "reason"]),
            CounterMetricFamily("mrtr_proxy_admission_refusals", "", labels=["reason"]),
        ]
