"""The list-page cache of aggregated routes at the front (the pure rules: proxy/routes/page_cache.py).

A merged list's page of one upstream (aggregate/lists.py) goes through `ListCache.page`: given from the
cache while fresh for the route (`routes[].list_cache_ms`, and the upstream's own `ttlMs`), else asked for
and kept when it may be. A `list_changed` the proxy hears from an upstream drops that upstream's entries of
the list: every pooled legacy session tells `heard` (process/app.py gives the pools' session factories
it), whether or not a client listens; a 2026-07-28 upstream is heard only on the listen streams of clients'
`subscriptions/listen` (and legacy clients' GET streams), whose member push listen.py wraps with
`hearing`. Otherwise the route's TTL (and a modern upstream's ttlMs) alone bounds how stale a page can be.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import structlog

from proxy.routes.merge import Answered, list_kind
from proxy.routes.page_cache import PUBLIC, STALE_AFTER, Hints, PageCache, PageKey
from proxy.routes.table import Member, Route
from proxy.upstream.pool import PoolKey
from proxy.wire import jsonrpc

log = structlog.get_logger("proxy.routes")

Freshness = tuple[float, bool]  # seconds the page stays fresh, and whether its upstream called it public
Push = Callable[[jsonrpc.Notification], None]


class ListCache:
    def __init__(self, store: PageCache | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.store = store if store is not None else PageCache()
        self._clock = clock
        self.changed: Callable[[tuple[str, ...]], None] | None = None  # told the lists a change made stale

    async def page(
        self,
        route: Route,
        member: Member,
        method: str,
        cursor: str | None,
        *,
        params: Mapping[str, Any],
        key: PoolKey,
        fetch: Callable[[], Awaitable[Answered]],
        modern: Callable[[], Awaitable[bool]],
    ) -> tuple[Answered, Freshness | None]:
        """One upstream's page of `method` for the client of `key`, and how fresh it is (None: not
        cacheable, so the merged page is not either). Only a plain list request is cached: one carrying
        other params than the cursor is always asked for."""
        ttl = route.list_cache
        if ttl <= 0 or params:
            return await fetch(), None
        page = PageKey(member.upstream, method, cursor, (key.capabilities, key.forwarded))
        hit = self.store.get(page, key.principal, ttl, self._clock())
        if hit is not None:
            return Answered(member, hit.result), (hit.left, hit.public)
        epoch = self.store.epoch(member.upstream, method)
        answered = await fetch()
        result = answered.result
        if result is None or list_kind(method) not in result:  # a failure, or no such list: never kept
            return answered, None
        hints = Hints.of(result, modern=await modern())
        try:
            size = len(json.dumps(result, separators=(",", ":")))
        except (TypeError, ValueError):
            return answered, None
        kept = self.store.put(
            page, key.principal, result, hints=hints, size=size, epoch=epoch, now=self._clock()
        )
        if not kept:
            return answered, None
        return answered, (ttl if hints.ttl is None else min(ttl, hints.ttl), hints.scope == PUBLIC)

    def heard(self, upstream: str, note: jsonrpc.Notification) -> None:
        """A notification from `upstream`: a list_changed makes its cached pages of that list stale."""
        methods = STALE_AFTER.get(note.method)
        if methods is not None:
            gone = self.store.changed(upstream, methods)
            log.debug("route.list_cache_dropped", upstream=upstream, notification=note.method, entries=gone)
            if self.changed is not None:
                self.changed(methods)

    def hearing(self, upstream: str, push: Push) -> Push:
        """`push` (a listen's), telling the cache first."""

        def heard(note: jsonrpc.Notification) -> None:
            self.heard(upstream, note)
            push(note)

        return heard

    @staticmethod
    def deaf(upstream: str, push: Push) -> Push:
        """`hearing` where there is no cache (no aggregated route): `push` itself."""
        return push
