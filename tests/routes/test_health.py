"""What /readyz shows of a route: who was left out (until it answers again), clashes once each, bounded."""

from __future__ import annotations

from proxy.routes.health import RouteHealth
from proxy.routes.index import Clash


def test_left_out_until_listed_again() -> None:
    health = RouteHealth()
    health.left_out("fleet", "fast", "timeout", at=100.0)
    assert health.detail("fleet", ["fast", "memory"], now=112.4) == {
        "upstreams": {"fast": "left out of lists (timeout, 12s ago)", "memory": "listed"}
    }
    health.listed("fleet", "fast")
    assert health.detail("fleet", ["fast"], now=113.0) == {"upstreams": {"fast": "listed"}}


def test_clashes_are_new_once_and_bounded() -> None:
    health = RouteHealth()
    clash = Clash("tools", "echo", "fast", "everything")
    assert health.clashed("bare", [clash]) == [clash]
    assert health.clashed("bare", [clash]) == []  # logged once
    assert health.detail("bare", [], now=0)["clashes"] == [
        "tool 'echo' is listed by 'fast' and 'everything'; 'fast' keeps it"
    ]
    many = [Clash("tools", f"t{i}", "a", "b") for i in range(150)]
    health.clashed("bare", many)
    assert len(health.detail("bare", [], now=0)["clashes"]) == 100
