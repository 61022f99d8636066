"""The migration report's counts for Prometheus (issue 44), read from the book at scrape time: nothing is
added to a call's path for them.

- `mrtr_proxy_migration_calls_total{upstream, tool, client_era, path}`: tools/call requests since the
  process started, by the job that served them (adapted, relayed, mirrored, passthrough; proxy/migration);
- `mrtr_proxy_migration_asked_total{upstream, tool, client_era, path}`: of them, those whose first answer
  asked for input (on the adapted path: a tool asking inline).

`tool` is a name of `metrics.tools`, else "other" (as for mrtr_proxy_tool_calls_total), so the series are
bounded by upstreams x (len(metrics.tools) + 1) x 4 paths (the client era follows from the path). A
restart starts them at zero, as every counter (Prometheus' rate() and increase() take that in stride).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Final

from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

from proxy.migration.tally import ASKED, CLIENT_ERA, PATHS, MigrationBook

OTHER: Final = "other"
LABELS: Final = ["upstream", "tool", "client_era", "path"]


class MigrationCollector(Collector):
    def __init__(self, book: MigrationBook, tools: Iterable[str]) -> None:
        self._book = book
        self._tools = frozenset(tools)

    def collect(self) -> Iterator[Metric]:
        calls = CounterMetricFamily(
            "mrtr_proxy_migration_calls",
            "tools/call requests by upstream, tool, client era and path",
            labels=LABELS,
        )
        asked = CounterMetricFamily(
            "mrtr_proxy_migration_asked",
            "tools/call requests whose first answer asked for input (adapted: the tool asked inline)",
            labels=LABELS,
        )
        for name, up in self._book.upstreams.items():
            sums: dict[str, list[int]] = {}
            for tool, cell in up.cells.items():
                label = tool if tool in self._tools else OTHER
                into = sums.setdefault(label, [0] * len(cell.life))
                for i, n in enumerate(cell.life):
                    into[i] += n
            sums.setdefault(OTHER, [0] * (2 * len(PATHS)))
            for label, life in sums.items():
                for i, path in enumerate(PATHS):
                    values = [name, label, CLIENT_ERA[path], path]
                    calls.add_metric(values, life[i])
                    asked.add_metric(values, life[ASKED + i])
        yield calls
        yield asked
