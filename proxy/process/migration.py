"""The migration report wired to the running app (issue 44): the book the front counts into, made from the
configuration, and this replica's report as `GET /admin/migration` serves it (proxy/process/admin.py).

Learned legacy tools: the book reads them, when a report is built, from the era book's per-tool paths
(upstream/tool_paths.py: the tools a two-era upstream refused to ask at 2026-07-28, learned per replica).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any, Final

from aiohttp import web

from proxy.config import Config
from proxy.front.legacy.mirror.front import LegacyMirror
from proxy.front.modern.front import ModernFront
from proxy.migration.report import combine, snapshot
from proxy.migration.tally import MigrationBook
from proxy.migration.verdict import Thresholds
from proxy.observe.metrics import METRICS
from proxy.observe.migration import MigrationCollector
from proxy.process.appstate import CALLS, CONFIG, ERAS, MIGRATION


def migration_book(app: web.Application, modern: ModernFront, mirror: LegacyMirror) -> MigrationBook:
    """The book the endpoint counts into, each upstream's configured tool names (`legacy_tools`,
    `metrics.tools`) listed from the start; the fronts tell it the tools the upstreams list, the era book's
    tool paths the legacy tools it learned (read only when a report is built)."""
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
    paths = app[ERAS].paths
    book.learn_from(lambda name: paths.learned().get(name, {}).get("legacy", []))
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


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


# -- the admin page's view of several replicas (proxy/process/admin.py routes these) ---------------------

CROSS_ORIGIN: Final = frozenset({"/admin/migration", "/admin/calls"})  # the page reads other replicas' too
MAX_SUM_BYTES: Final = 8 << 20  # a sum's reports (POST /admin/migration/sum)
MAX_REPLICAS: Final = 64


@web.middleware
async def cross_origin(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Let the admin page of one replica read another's report and calls: any origin may send a request
    (a preflight is answered here, before the token is looked at, as a preflight carries none); the answer
    is still behind the bearer token, which a page of another origin does not have (no cookie is used)."""
    if request.path not in CROSS_ORIGIN:
        return await handler(request)
    if request.method == "OPTIONS":
        allow = {"Access-Control-Allow-Methods": "GET", "Access-Control-Allow-Headers": "Authorization"}
        response: web.StreamResponse = web.Response(status=204, headers=allow)
    else:
        response = await handler(request)
    response.headers["Access-Control-Allow-Origin"] = "*"
    response.headers["Access-Control-Max-Age"] = "600"
    return response


async def migration_route(request: web.Request, main: web.Application) -> web.Response:
    """`GET /admin/migration`: this replica's report."""
    return web.json_response(report(main))


async def sum_route(request: web.Request) -> web.Response:
    """`POST /admin/migration/sum`: the sum of the reports in the body (a JSON list, as `GET
    /admin/migration` answers each), judged again (the admin page's view of several replicas)."""
    too_large = web.json_response({"error": f"More than {MAX_SUM_BYTES} bytes of reports"}, status=413)
    if request.content_length is not None and request.content_length > MAX_SUM_BYTES:
        return too_large
    raw = bytearray()
    async for chunk in request.content.iter_chunked(64 * 1024):
        raw += chunk
        if len(raw) > MAX_SUM_BYTES:
            return too_large
    try:
        body = json.loads(raw)
        if not isinstance(body, list) or not 0 < len(body) <= MAX_REPLICAS:
            raise ValueError(f"expected a list of 1 to {MAX_REPLICAS} reports")
        summed = combine(body)
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        message = f"Not a list of migration reports (GET /admin/migration answers one): {exc}"
        return web.json_response({"error": message}, status=400)
    return web.json_response(summed)


__all__ = [
    "MIGRATION",
    "cross_origin",
    "migration_book",
    "migration_route",
    "report",
    "sum_route",
    "thresholds",
]
