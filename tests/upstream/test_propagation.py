"""What the proxy's own requests (the era probe) keep of the propagated headers (pure)."""

from __future__ import annotations

from proxy.upstream.propagation import own_only, propagated, propagating


def test_own_only_keeps_the_proxys_via_entry_and_its_ids() -> None:
    client_via = "1.1 " + "x" * 2040
    with propagating({"X-Request-Id": "r1", "Via": f"{client_via}, 1.1 mrtr-proxy-0123456789ab"}):
        assert own_only() == {"X-Request-Id": "r1", "Via": "1.1 mrtr-proxy-0123456789ab"}
        assert propagated()["Via"].startswith(client_via)  # the client's own requests still carry it all
    with propagating({"via": "1.1 mrtr-proxy-0123456789ab"}):
        assert own_only() == {"via": "1.1 mrtr-proxy-0123456789ab"}
    assert own_only() == {}  # outside a request: nothing
