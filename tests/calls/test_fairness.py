"""Who a client is for the fair share of parking room (issue 29, item 8): its address and its network."""

from __future__ import annotations

import pytest

from proxy.calls.fairness import client_keys, over_fair_share


@pytest.mark.parametrize(
    ("address", "keys"),
    [
        ("203.0.113.9", ("203.0.113.9", "203.0.113.0/24")),
        ("2001:db8:7:1::a", ("2001:db8:7:1::a", "2001:db8:7:1::/64")),
        ("::ffff:203.0.113.9", ("203.0.113.9", "203.0.113.0/24")),  # IPv4-mapped: the IPv4 network
        ("unknown", ("unknown",)),
        ("", ()),
    ],
)
def test_client_keys(address: str, keys: tuple[str, ...]) -> None:
    assert client_keys(address) == keys


def test_a_client_alone_gets_half_the_room_and_a_newcomer_always_finds_some() -> None:
    cap, parked = 12, 0
    while not over_fair_share(parked, parked, cap):
        parked += 1
    assert parked == 6
    assert not over_fair_share(0, 11, cap)  # the last free place goes to someone holding none
    assert over_fair_share(1, 11, cap)
