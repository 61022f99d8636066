"""How many legacy sessions one principal, and one client address, may hold (issue 14, finding 2).

Each legacy `initialize` costs the upstream a session, and on a bridged `stdio` upstream a whole child
process; principals are free to mint. So besides `pool.max_sessions` per upstream, sessions are counted by
principal (`front.legacy_sessions_per_principal`) and by client address
(`front.legacy_sessions_per_address`). A bridged session is counted until it closes. A relayed session
(Streamable HTTP upstream, no state here) is counted until its DELETE, or until nothing used it for
`ttl` seconds (`pool.idle_ttl_s`: the proxy cannot see the upstream forget it). Pure bookkeeping, no I/O.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(slots=True)
class _Held:
    upstream: str
    principal: str
    address: str
    expires: float | None  # None: until `closed`


class SessionQuota:
    def __init__(
        self, *, per_principal: int, per_address: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._per_principal = per_principal
        self._per_address = per_address  # 0: no per-address share
        self._clock = clock
        self._held: dict[str, _Held] = {}
        self._principals: Counter[str] = Counter()
        self._addresses: Counter[str] = Counter()
        self._upstreams: Counter[str] = Counter()
        self._principal_here: Counter[tuple[str, str]] = Counter()  # by (upstream, principal)

    def refusal(
        self, upstream: str, principal: str, address: str, max_sessions: int, per_principal: int = 0
    ) -> str | None:
        """Why one more session for this principal and address is refused, or None. `per_principal`: the
        upstream's own cap per principal (pool.max_sessions_per_principal; 0: none)."""
        self._expire()
        if self._upstreams[upstream] >= max_sessions:
            return f"{max_sessions} legacy sessions open (pool.max_sessions)"
        if 0 < per_principal <= self._principal_here[upstream, principal]:
            return (
                f"this client holds {per_principal} legacy sessions of upstream {upstream!r} "
                "(pool.max_sessions_per_principal); close some (DELETE) first"
            )
        if self._principals[principal] >= self._per_principal:
            return (
                f"this client holds {self._per_principal} legacy sessions "
                "(front.legacy_sessions_per_principal); close some (DELETE) first"
            )
        if address and 0 < self._per_address <= self._addresses[address]:
            return (
                f"this client address holds {self._per_address} legacy sessions "
                "(front.legacy_sessions_per_address); close some (DELETE) first"
            )
        return None

    def opened(self, token: str, upstream: str, principal: str, address: str, ttl: float | None) -> None:
        if token in self._held:
            self.touch(token, ttl)
            return
        self._held[token] = _Held(upstream, principal, address, self._deadline(ttl))
        self._upstreams[upstream] += 1
        self._principals[principal] += 1
        self._principal_here[upstream, principal] += 1
        if address:
            self._addresses[address] += 1

    def touch(self, token: str, ttl: float | None) -> None:
        """The session was used: a relayed one lives `ttl` more seconds."""
        held = self._held.get(token)
        if held is not None and held.expires is not None:
            held.expires = self._deadline(ttl)

    def closed(self, token: str) -> None:
        held = self._held.pop(token, None)
        if held is None:
            return
        here = (held.upstream, held.principal)
        self._principal_here[here] -= 1
        if self._principal_here[here] <= 0:
            del self._principal_here[here]
        for counter, key in (
            (self._upstreams, held.upstream),
            (self._principals, held.principal),
            (self._addresses, held.address),
        ):
            if key:
                counter[key] -= 1
                if counter[key] <= 0:
                    del counter[key]

    def __len__(self) -> int:
        return len(self._held)

    def _deadline(self, ttl: float | None) -> float | None:
        return None if ttl is None else self._clock() + ttl

    def _expire(self) -> None:
        now = self._clock()
        for token in [t for t, h in self._held.items() if h.expires is not None and h.expires <= now]:
            self.closed(token)
