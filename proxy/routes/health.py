"""What the operator sees of an aggregated route on /readyz: which upstreams the last lists left out (and
why, and when), and the name clashes found. Plain state: the front writes it, readiness reads it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from proxy.routes.index import Clash


@dataclass(slots=True)
class RouteHealth:
    _left_out: dict[tuple[str, str], tuple[str, float]] = field(default_factory=dict)
    _clashes: dict[str, list[Clash]] = field(default_factory=dict)

    def listed(self, route: str, upstream: str) -> None:
        """`upstream` answered its part of one of `route`'s lists."""
        self._left_out.pop((route, upstream), None)

    def left_out(self, route: str, upstream: str, why: str, at: float) -> None:
        self._left_out[(route, upstream)] = (why, at)

    def clashed(self, route: str, clashes: Iterable[Clash]) -> list[Clash]:
        """Record clashes; returns the ones not seen before (to be logged once)."""
        known = self._clashes.setdefault(route, [])
        new = [c for c in clashes if c not in known]
        known += new
        del known[:-100]  # bounded: the most recent hundred
        return new

    def detail(self, route: str, upstreams: Iterable[str], now: float) -> dict[str, Any]:
        members = {}
        for up in upstreams:
            found = self._left_out.get((route, up))
            members[up] = (
                "listed" if found is None else f"left out of lists ({found[0]}, {round(now - found[1])}s ago)"
            )
        out: dict[str, Any] = {"upstreams": members}
        if clashes := self._clashes.get(route):
            out["clashes"] = [c.describe() for c in clashes]
        return out
