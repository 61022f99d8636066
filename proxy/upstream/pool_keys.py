"""The key a pooled session is shared by (principal, declared capabilities, forwarded credentials), and
one key object per value (pool.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

from proxy.translate.capabilities import ClientCapabilities


@dataclass(frozen=True, slots=True)
class PoolKey:
    """Sessions are shared only between calls with the same key: a legacy server may keep per-session
    state (cached roots, log level, data a tool stored), which must not cross between principals."""

    capabilities: ClientCapabilities
    forwarded: tuple[tuple[str, str], ...] = ()  # client headers passed through, e.g. authorization
    principal: str = ""
    _hash: int | None = field(default=None, init=False, repr=False, compare=False)

    def __hash__(self) -> int:
        """Computed once: a call looks its key up in the pool's maps several times (acquire, release, the
        session's roots and log level), and the generated hash hashed every field, the capabilities' too."""
        cached = self._hash
        if cached is None:
            cached = hash((self.capabilities, self.forwarded, self.principal))
            object.__setattr__(self, "_hash", cached)
        return cached


class PoolKeys:
    """One PoolKey per value, so the pool's maps find a key by identity: a new key per request was compared
    field by field (the dataclass __eq__) at each of a call's look-ups (acquire, release). Bounded: the
    values are the clients' (a flood of principals or tokens only empties it; a key made anew is equal)."""

    def __init__(self, limit: int = 4096) -> None:
        self._keys: dict[tuple[ClientCapabilities, tuple[tuple[str, str], ...], str], PoolKey] = {}
        self._limit = limit

    def of(
        self, capabilities: ClientCapabilities, forwarded: tuple[tuple[str, str], ...], principal: str
    ) -> PoolKey:
        parts = (capabilities, forwarded, principal)
        key = self._keys.get(parts)
        if key is None:
            if len(self._keys) >= self._limit:
                self._keys.clear()
            key = self._keys[parts] = PoolKey(capabilities, forwarded, principal)
        return key
