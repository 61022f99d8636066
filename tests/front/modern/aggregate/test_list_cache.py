"""ListCache (the front's side of the list-page cache): what it keeps, and what it never does."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from proxy.config import RouteConfig, RouteMember
from proxy.front.modern.aggregate.list_cache import ListCache
from proxy.routes.merge import Answered
from proxy.routes.page_cache import PageCache
from proxy.routes.table import Route
from proxy.translate.capabilities import ClientCapabilities
from proxy.upstream.pool import PoolKey
from proxy.wire import jsonrpc

ROUTE = Route.of(RouteConfig("fleet", (RouteMember("a"), RouteMember("b")), list_cache_ms=5000))
KEY = PoolKey(ClientCapabilities(), (("authorization", "Bearer x"),), "p")


class Upstream:
    def __init__(self, *answers: Answered) -> None:
        self.answers = list(answers)
        self.asked = 0

    async def fetch(self) -> Answered:
        self.asked += 1
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


async def legacy() -> bool:
    return False


async def page(cache: ListCache, upstream: Upstream, params: Mapping[str, Any] | None = None) -> Any:
    member = ROUTE.members[0]
    return await cache.page(
        ROUTE, member, "tools/list", None, params=params or {}, key=KEY, fetch=upstream.fetch, modern=legacy
    )


async def test_a_page_is_kept_and_given_again() -> None:
    now = [0.0]
    cache = ListCache(clock=lambda: now[0])
    upstream = Upstream(Answered(ROUTE.members[0], {"tools": [{"name": "echo"}]}))
    first, fresh = await page(cache, upstream)
    assert fresh == (5.0, False) and upstream.asked == 1
    now[0] = 4.0
    again, fresh = await page(cache, upstream)
    assert again.result == first.result and fresh == (1.0, False) and upstream.asked == 1
    now[0] = 5.0
    await page(cache, upstream)
    assert upstream.asked == 2


@pytest.mark.parametrize(
    "answer",
    [
        Answered(ROUTE.members[0], None, "timeout"),  # left out
        Answered(ROUTE.members[0], None, "unauthorized"),  # this client's credentials refused
        Answered(ROUTE.members[0], {}),  # Method not found: no such list
    ],
)
async def test_a_failure_or_a_missing_list_is_never_kept(answer: Answered) -> None:
    cache = ListCache()
    upstream = Upstream(answer)
    assert (await page(cache, upstream))[1] is None
    await page(cache, upstream)
    assert upstream.asked == 2 and len(cache.store) == 0


async def test_list_changed_heard_on_a_listen_drops_the_page() -> None:
    cache = ListCache()
    upstream = Upstream(Answered(ROUTE.members[0], {"tools": []}))
    await page(cache, upstream)
    pushed: list[jsonrpc.Notification] = []
    stale: list[tuple[str, ...]] = []
    cache.changed = stale.append  # the route lists' indexes
    push = cache.hearing("a", pushed.append)
    push(jsonrpc.Notification("notifications/prompts/list_changed", {}))
    await page(cache, upstream)
    assert upstream.asked == 1  # another list's change
    push(jsonrpc.Notification("notifications/tools/list_changed", {}))
    await page(cache, upstream)
    assert upstream.asked == 2 and len(pushed) == 2  # and the listener still gets every notification
    assert stale == [("prompts/list",), ("tools/list",)]


async def test_the_cap_holds_and_zero_disables() -> None:
    cache = ListCache(PageCache(max_entries=1))
    for token in ("x", "y", "z"):
        key = PoolKey(ClientCapabilities(), (("authorization", token),), token)
        upstream = Upstream(Answered(ROUTE.members[0], {"tools": []}))
        await cache.page(
            ROUTE,
            ROUTE.members[0],
            "tools/list",
            None,
            params={},
            key=key,
            fetch=upstream.fetch,
            modern=legacy,
        )
    assert len(cache.store) == 1
    off = Route.of(RouteConfig("off", (RouteMember("a"),), list_cache_ms=0))
    upstream = Upstream(Answered(off.members[0], {"tools": []}))
    for _ in range(2):
        await cache.page(
            off, off.members[0], "tools/list", None, params={}, key=KEY, fetch=upstream.fetch, modern=legacy
        )
    assert upstream.asked == 2
