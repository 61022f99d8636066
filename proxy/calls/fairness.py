"""Who a client is, for the fair share of an upstream's parking room: its address and its network.

One attacker with four neighbouring addresses is one client, not four: a call counts against its address
and against the address's /24 (IPv4) or /64 (IPv6) — the block one host, one home or one small cloud
tenant gets. An address that is not an IP (an obfuscated `Forwarded: for=_x`, `unknown`) counts only as
itself. Pure.
"""

from __future__ import annotations

import ipaddress
from functools import lru_cache

V4_PREFIX = 24
V6_PREFIX = 64


@lru_cache(maxsize=4096)
def client_keys(address: str) -> tuple[str, ...]:
    """The keys a call from `address` counts under: the address, then its network (`203.0.113.0/24`,
    `2001:db8:1:2::/64`); none for "" (an address nobody knows)."""
    if not address:
        return ()
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return (address,)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    bits = V4_PREFIX if ip.version == 4 else V6_PREFIX
    network = ipaddress.ip_network(f"{ip}/{bits}", strict=False)
    return (str(ip), str(network))


def over_fair_share(held: int, parked: int, cap: int) -> bool:
    """May a client holding `held` of an upstream's `parked` calls waiting for input park one more, with
    room for `cap`? Not when it already holds as many as are still free: alone it gets half the room, a
    second client half of what is left, and so on, so a newcomer always finds room until the cap is
    reached by many clients — a flood from a few takes at most their halves, never the whole room."""
    return held >= cap - parked
