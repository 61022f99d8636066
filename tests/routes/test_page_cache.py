"""The list-page cache's rules: freshness per route, the upstream's own hints, views and principals kept
apart, list_changed, and the caps."""

from __future__ import annotations

from proxy.routes.page_cache import Hints, PageCache, PageKey, merged_hints

LEGACY = Hints(None, None)
PAGE = {"tools": [{"name": "echo"}]}


def key(sent: object = ("caps", ()), upstream: str = "a", cursor: str | None = None) -> PageKey:
    return PageKey(upstream, "tools/list", cursor, sent)  # type: ignore[arg-type]


def test_a_page_is_fresh_for_the_routes_time_then_gone() -> None:
    cache = PageCache()
    assert cache.put(key(), "p", PAGE, hints=LEGACY, size=30, epoch=0, now=100.0)
    hit = cache.get(key(), "p", 5.0, 101.0)
    assert hit is not None and hit.result == PAGE and hit.left == 4.0 and not hit.public
    assert cache.get(key(), "q", 5.0, 104.9) is not None  # a legacy page: the view, not the principal
    assert cache.get(key(), "p", 5.0, 105.0) is None
    assert len(cache) == 0 and cache.bytes == 0


def test_what_goes_upstream_and_the_cursor_are_part_of_the_key() -> None:
    cache = PageCache()
    cache.put(
        key(("caps", (("authorization", "Bearer A"),))), "p", PAGE, hints=LEGACY, size=1, epoch=0, now=0
    )
    assert cache.get(key(("caps", (("authorization", "Bearer B"),))), "p", 5.0, 1.0) is None
    assert cache.get(key(("other-caps", (("authorization", "Bearer A"),))), "p", 5.0, 1.0) is None
    assert cache.get(key(("caps", (("authorization", "Bearer A"),)), cursor="2"), "p", 5.0, 1.0) is None
    assert cache.get(key(("caps", (("authorization", "Bearer A"),)), upstream="b"), "p", 5.0, 1.0) is None
    assert cache.get(key(("caps", (("authorization", "Bearer A"),))), "p", 5.0, 1.0) is not None


def test_a_modern_pages_hints_are_honoured() -> None:
    assert Hints.of({"tools": []}, modern=False) == LEGACY
    assert Hints.of({"tools": []}, modern=True) == Hints(0.0, "private")  # absent: stale at once, private
    assert Hints.of({"ttlMs": 2000, "cacheScope": "public"}, modern=True) == Hints(2.0, "public")
    assert Hints.of({"ttlMs": True, "cacheScope": "shared"}, modern=True) == Hints(0.0, "private")
    cache = PageCache()
    assert not cache.put(key(), "p", PAGE, hints=Hints(0.0, "public"), size=1, epoch=0, now=0)
    assert cache.put(key(), "p", PAGE, hints=Hints(2.0, "private"), size=1, epoch=0, now=0)
    assert cache.get(key(), "q", 5.0, 1.0) is None  # private: another principal never gets it
    hit = cache.get(key(), "p", 5.0, 1.0)
    assert hit is not None and not hit.public and hit.left == 1.0  # the upstream's 2 s, not the route's 5
    assert cache.get(key(), "p", 5.0, 2.0) is None


def test_list_changed_drops_the_upstreams_pages_and_a_fetch_under_way() -> None:
    cache = PageCache()
    cache.put(key(), "p", PAGE, hints=LEGACY, size=1, epoch=0, now=0)
    cache.put(key(upstream="b"), "p", PAGE, hints=LEGACY, size=1, epoch=0, now=0)
    started = cache.epoch("a", "tools/list")
    assert cache.changed("a", ["tools/list"]) == 1
    assert cache.get(key(), "p", 5.0, 1.0) is None
    assert cache.get(key(upstream="b"), "p", 5.0, 1.0) is not None
    assert not cache.put(key(), "p", PAGE, hints=LEGACY, size=1, epoch=started, now=1)  # began before it
    assert cache.put(key(), "p", PAGE, hints=LEGACY, size=1, epoch=cache.epoch("a", "tools/list"), now=1)


def test_the_caps_hold() -> None:
    cache = PageCache(max_entries=3, max_bytes=100)
    for i in range(5):
        cache.put(key(cursor=str(i)), "p", PAGE, hints=LEGACY, size=10, epoch=0, now=0)
    assert len(cache) == 3
    assert [cache.get(key(cursor=str(i)), "p", 5.0, 1.0) is not None for i in range(5)] == [0, 0, 1, 1, 1]
    cache.put(key(cursor="big"), "p", PAGE, hints=LEGACY, size=95, epoch=0, now=0)
    assert len(cache) == 1 and cache.bytes == 95  # the least recently used went for the bytes
    assert not cache.put(key(cursor="huge"), "p", PAGE, hints=LEGACY, size=2 << 20, epoch=0, now=0)


def test_a_merged_pages_hints() -> None:
    assert merged_hints([(4.0, True), (2.5, True)], complete=True, per_client=False) == {
        "ttlMs": 2500,
        "cacheScope": "public",
    }
    assert (
        merged_hints([(4.0, True), (2.5, False)], complete=True, per_client=False)["cacheScope"] == "private"
    )
    assert merged_hints([(4.0, True)], complete=True, per_client=True)["cacheScope"] == "private"
    assert merged_hints([(4.0, True)], complete=False, per_client=False) == {
        "ttlMs": 0,
        "cacheScope": "private",
    }
