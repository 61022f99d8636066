"""The aggregated routes wired into the app (docs/routes.md): their health for /readyz, their
series in /metrics, and the modern front's part that routes by name and merges lists (front/modern/
aggregate.py). Beside app.py, which calls it once at start-up, so the wiring of one capability reads in one
place."""

from __future__ import annotations

from collections.abc import Mapping

from aiohttp import web

from proxy.front.modern.aggregate.front import AggregateFront
from proxy.front.modern.aggregate.list_cache import ListCache
from proxy.front.modern.aggregate.lists import RouteLists
from proxy.front.modern.relay.native import NativeRelay
from proxy.front.oauth import OAUTH
from proxy.observe.metrics import METRICS
from proxy.process.appstate import CODEC, CONFIG, ROUTES
from proxy.routes.health import RouteHealth
from proxy.routes.table import RouteTable, members
from proxy.tasks.front import TaskFront
from proxy.upstream.era import EraBook
from proxy.upstream.pool import SessionPool
from proxy.upstream.senders import ModernSenders


def aggregated(
    app: web.Application,
    pools: Mapping[str, SessionPool],
    tasks: TaskFront,
    senders: ModernSenders,
    eras: EraBook,
    *,
    cache: ListCache | None = None,
) -> AggregateFront | None:
    """The aggregated routes' front; None when no route is configured."""
    config = app[CONFIG]
    app[ROUTES] = RouteHealth()
    if not config.routes:
        return None
    app[METRICS].route_members(members(config))
    relay = NativeRelay.from_config(config, senders, eras, app[CODEC])  # to a route's modern upstreams
    judges, ring = app[OAUTH].upstream_judges, lambda: app[CODEC].ring
    lists = RouteLists(
        pools, ring, app[ROUTES], tasks, observer=app[METRICS], judges=judges, relay=relay, cache=cache
    )
    return AggregateFront(lists, tasks, RouteTable.of(config), task_upstream=relay.task_upstream)
