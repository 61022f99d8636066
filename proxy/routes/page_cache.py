"""The list-page cache of aggregated routes, pure: which upstream page may answer which client, for how long.

A merged list asks every upstream of the route for a page; within a route's `list_cache_ms` the page an
upstream gave is given again without asking it. An entry is keyed by what decides the upstream's answer:
the upstream, the list method, the upstream's own cursor, and what the client's requests carry to that
upstream (its forwarded headers or validate mode's credentials and claim headers, and its declared
capabilities): clients the upstream cannot tell apart share an entry, one whose credentials it tells
apart never gets another's. A page the upstream marked `cacheScope: "private"` (2026-07-28 upstreams)
is kept for the same principal only, and for no longer than its `ttlMs` (absent: 0, not kept); a legacy
upstream's page has no hints and is kept for the route's time. Errors, refusals and left-out upstreams
are never stored. A `list_changed` heard from an upstream drops its entries of that list at once, and a
fetch that began before it is not stored. Bounded: MAX_ENTRIES entries and MAX_BYTES bytes in all, the
least recently used dropped first; a page larger than MAX_PAGE_BYTES is not kept.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

MAX_ENTRIES: Final = 2048
MAX_BYTES: Final = 32 * 1024 * 1024
MAX_PAGE_BYTES: Final = 1024 * 1024
PUBLIC: Final = "public"
PRIVATE: Final = "private"
# What each list_changed notification makes stale.
STALE_AFTER: Final = {
    "notifications/tools/list_changed": ("tools/list",),
    "notifications/prompts/list_changed": ("prompts/list",),
    "notifications/resources/list_changed": ("resources/list", "resources/templates/list"),
}


@dataclass(frozen=True, slots=True)
class Hints:
    """A page's own caching hints: how long it may be kept (seconds; None: no limit of its own, a legacy
    page) and its scope ("public", "private"; None: a legacy page, which says nothing: it is kept for the
    view that asked, and never called public)."""

    ttl: float | None
    scope: str | None

    @property
    def private(self) -> bool:
        return self.scope == PRIVATE

    @classmethod
    def of(cls, result: Mapping[str, Any], *, modern: bool) -> Hints:
        """A modern page's `ttlMs` (absent or invalid: 0) and `cacheScope` (anything but "public" is
        private); a legacy page has neither: kept for the route's time, shared within the view."""
        if not modern:
            return cls(None, None)
        ttl = result.get("ttlMs")
        if not isinstance(ttl, int) or isinstance(ttl, bool) or ttl < 0:
            ttl = 0
        return cls(ttl / 1000, PUBLIC if result.get("cacheScope") == PUBLIC else PRIVATE)


@dataclass(frozen=True, slots=True)
class Cached:
    result: Mapping[str, Any]
    stored: float  # the caller's clock
    expires: float  # the page's own limit (inf: none)
    public: bool  # the upstream said so
    size: int


@dataclass(frozen=True, slots=True)
class Fresh:
    """A page given from the cache, how much longer it stays fresh for the asking route (seconds), and
    whether its upstream called it public."""

    result: Mapping[str, Any]
    left: float
    public: bool


@dataclass(slots=True)
class PageCache:
    max_entries: int = MAX_ENTRIES
    max_bytes: int = MAX_BYTES
    _held: OrderedDict[tuple[Hashable, ...], Cached] = field(default_factory=OrderedDict)
    _bytes: int = 0
    _epochs: dict[tuple[str, str], int] = field(default_factory=dict)  # (upstream, method): changes heard

    def epoch(self, upstream: str, method: str) -> int:
        """Taken before a fetch: `put` stores the page only if no change was heard meanwhile."""
        return self._epochs.get((upstream, method), 0)

    def get(self, key: PageKey, principal: str, ttl: float, now: float) -> Fresh | None:
        """The page held for `key`, if still fresh for a route keeping pages `ttl` seconds."""
        for one in (key.shared(), key.private(principal)):
            held = self._held.get(one)
            if held is None:
                continue
            left = min(held.stored + ttl, held.expires) - now
            if left <= 0:
                self._drop(one)
                continue
            self._held.move_to_end(one)
            return Fresh(held.result, left, held.public)
        return None

    def put(
        self,
        key: PageKey,
        principal: str,
        result: Mapping[str, Any],
        *,
        hints: Hints,
        size: int,
        epoch: int,
        now: float,
    ) -> bool:
        """Keep `result` (its JSON `size` in bytes) unless a change was heard since `epoch`, its own hints
        forbid it, or it is too large. True when kept."""
        if epoch != self.epoch(key.upstream, key.method) or hints.ttl == 0 or size > MAX_PAGE_BYTES:
            return False
        expires = float("inf") if hints.ttl is None else now + hints.ttl
        one = key.private(principal) if hints.private else key.shared()
        self._drop(one)
        self._held[one] = Cached(result, now, expires, hints.scope == PUBLIC, size)
        self._bytes += size
        while len(self._held) > self.max_entries or self._bytes > self.max_bytes:
            self._drop(next(iter(self._held)))
        return True

    def changed(self, upstream: str, methods: Iterable[str]) -> int:
        """The upstream said these lists changed: its entries of them go, and fetches under way are not
        stored. Returns how many entries went."""
        gone = 0
        for method in methods:
            self._epochs[(upstream, method)] = self.epoch(upstream, method) + 1
            for one in [k for k in self._held if k[0] == upstream and k[1] == method]:
                self._drop(one)
                gone += 1
        return gone

    def _drop(self, one: tuple[Hashable, ...]) -> None:
        held = self._held.pop(one, None)
        if held is not None:
            self._bytes -= held.size

    def __len__(self) -> int:
        return len(self._held)

    @property
    def bytes(self) -> int:
        return self._bytes


@dataclass(frozen=True, slots=True)
class PageKey:
    """One upstream page as one client asks for it: `sent` is what its requests carry to the upstream
    (hashable: forwarded headers, declared capabilities)."""

    upstream: str
    method: str
    cursor: str | None
    sent: Hashable

    def shared(self) -> tuple[Hashable, ...]:
        return (self.upstream, self.method, self.cursor, self.sent)

    def private(self, principal: str) -> tuple[Hashable, ...]:
        return (self.upstream, self.method, self.cursor, self.sent, principal)


def merged_hints(pages: Iterable[tuple[float, bool]], *, complete: bool, per_client: bool) -> dict[str, Any]:
    """The hints of a merged page from its upstream pages' (seconds fresh, public): fresh as long as the
    least fresh, public only if every page is and nothing in the page is the client's own (`per_client`:
    a cursor bound to the principal, a policy judged on its token). `complete`: no upstream left out and
    every page cacheable; otherwise the page is stale at once, so the client asks again."""
    seen = list(pages)
    if not complete or not seen:
        return {"ttlMs": 0, "cacheScope": PRIVATE}
    ttl = max(0, int(min(left for left, _ in seen) * 1000))
    public = not per_client and all(public for _, public in seen)
    return {"ttlMs": ttl, "cacheScope": PUBLIC if public else PRIVATE}
