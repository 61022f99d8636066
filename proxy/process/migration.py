"""The migration report wired to the running app (issue 44): the book the front counts into, made from the
configuration, and this replica's report as `GET /admin/migration` serves it (proxy/process/admin.py).

Learned legacy tools: the book takes them through `MigrationBook.learn_from(upstream -> names)`; until the
eras-paths registry (a per-upstream registry of learned tools) is merged, `learned` is empty and only the
configured `upstreams[].legacy_tools` are listed.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from proxy.config import Config
from proxy.front.legacy.mirror import LegacyMirror
from proxy.front.modern.front import ModernFront
from proxy.migration.report import snapshot
from proxy.migration.tally import MigrationBook
from proxy.migration.verdict import Thresholds
from proxy.observe.metrics import METRICS
from proxy.observe.migration import MigrationCollector
from proxy.process.appstate import CALLS, CONFIG, ERAS, MIGRATION


def migration_book(app: web.Application, modern: ModernFront, mirror: LegacyMirror) -> MigrationBook:
    """The book the endpoint counts into, each upstream's configured tool names (`legacy_tools`,
    `metrics.tools`) listed from the start; the fronts tell it the tools the upstreams list.

    Learned legacy tools (eras-paths): `book.learn_from(<upstream -> its learned names>)` here."""
    config = app[CONFIG]
    named = sorted(set(config.metrics.tools))
    book = MigrationBook(
        {u.name: (*u.legacy_tools, *named) for u in config.upstreams},
        legacy_tools={u.name: u.legacy_tools for u in config.upstreams},
    )
    modern.plain.migration = book  # told the tools each upstream lists
    if modern.relay is not None:
        modern.relay.migration = book
    mirror.migration = book
    app[MIGRATION] = book
    app[METRICS].registry.register(MigrationCollector(book, config.metrics.tools))  # read at scrape time
    return book


def thresholds(config: Config) -> Thresholds:
    m = config.migration
    return Thresholds(m.window_hours, m.min_calls, m.max_legacy_percent, m.top_clients)


def report(main: web.Application) -> dict[str, Any]:
    """This replica's migration report: the book's counts, each upstream's era and its parked calls."""
    config, book = main[CONFIG], main[MIGRATION]
    eras: dict[str, tuple[str, str, float]] = {}
    for name in book.upstreams:
        verdict = main[ERAS].verdict(name)
        if verdict is not None:
            eras[name] = (verdict.era, verdict.how, verdict.at)
    parked: dict[str, int] = {}
    registry = main[CALLS].registry
    for call in registry:
        if call.parked:
            parked[call.upstream] = parked.get(call.upstream, 0) + 1
    return snapshot(
        book,
        replica=config.replica_address,
        thresholds=thresholds(config),
        eras=eras,
        parked=parked,
    )


__all__ = ["MIGRATION", "migration_book", "report", "thresholds"]
