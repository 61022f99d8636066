"""Staged key rotation: which key of the ring seals, so that no replica seals with a key another lacks.

Every loaded key unseals. What seals is decided from each key's *role*, read from the name it was loaded
under (file name, or environment variable name), and from how long this process has been able to load it:

- ``next`` (``2-next``, ``MRTR_KEY_NEXT`` …): staged. It unseals but does not seal, so every replica can be
  given it first. It is promoted by the operator (renamed ``current``, the old one ``previous``), or, with
  ``keys.promote_after_s`` set, by the proxy itself once it has been loadable here for that long.
- ``previous``: kept only to open handles sealed before a rotation; seals only if nothing else can.
- ``current`` or any other name: a sealing candidate, first in load order wins (the old rule).

With ``promote_after_s`` set, no key seals before it has been loadable here for ``promote_after_s`` (the
time a Secret update takes to reach every pod): until then the best key that has seals instead — so even
the one-step "new key as ``0-current``" rotation seals with the new key only once every replica holds it.
And a sealing key that disappears from the files before any other key has propagated (a key update
that is not atomic, or an old key removed too early) stays in the ring, sealing, until one has: the
ring never jumps to a key the other replicas may not hold yet. Pure: the clock is passed in.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from .keyring import Key, KeyRing

__all__ = ["Role", "Rotation", "StagedKey", "choose_sealing", "role_of"]

Role = Literal["current", "next", "previous", "key"]
_ROLE = re.compile(r"(?:^|[-_.])(current|next|previous)$")


def role_of(name: str) -> Role:
    """The rotation role a key name gives: ``0-current`` → current, ``next`` → next, ``1-previous`` →
    previous, ``MRTR_KEY_NEXT`` → next; anything else is a plain key (a sealing candidate in load order)."""
    match = _ROLE.search(name.lower())
    if match is None:
        return "key"
    role: Role = match.group(1)  # type: ignore[assignment]
    return role


@dataclass(frozen=True, slots=True)
class StagedKey:
    name: str
    key: Key
    role: Role

    @classmethod
    def of(cls, name: str, key: Key) -> StagedKey:
        return cls(name, key, role_of(name))


def choose_sealing(
    keys: Sequence[StagedKey],
    loadable_for: dict[str, float],
    promote_after: float | None,
    current: str | None = None,
) -> str:
    """The key id that seals. `loadable_for`: seconds each key id has been loadable here; `current`: the
    one sealing now (with a delay, it keeps sealing until another key has propagated)."""
    if not keys:
        raise ValueError("no keys")
    staged = [k for k in keys if k.role == "next"]
    candidates = [k for k in keys if k.role in ("current", "key")]
    previous = [k for k in keys if k.role == "previous"]
    fallback = candidates + previous + staged  # never a staged key while another can seal
    if promote_after is None:
        return fallback[0].key.kid
    for k in staged + candidates + previous:  # a staged key is promoted once it has propagated
        if loadable_for.get(k.key.kid, 0.0) >= promote_after:
            return k.key.kid
    if current is not None and any(k.key.kid == current for k in keys):
        return current  # nothing has propagated yet: no change
    return fallback[0].key.kid


@dataclass(slots=True)
class Rotation:
    """Remembers when each key id was first loadable here, and builds the ring for the keys loaded now."""

    promote_after: float | None
    _first_seen: dict[str, float] = field(default_factory=dict)
    _keys: tuple[StagedKey, ...] = ()
    _sealing: StagedKey | None = None
    retained: StagedKey | None = None  # a sealing key gone from the files, kept until another propagated

    def ring(self, keys: Sequence[StagedKey], now: float) -> KeyRing:
        """The ring for `keys` (just loaded); a key not loadable any more is forgotten (so it waits the
        whole delay again should it come back), except a sealing key nothing can replace yet."""
        self._keys = tuple(keys)
        kids = {k.key.kid for k in keys}
        was = self._sealing
        if self.promote_after is not None and was is not None and was.key.kid not in kids:
            self.retained = StagedKey(was.name, was.key, "previous")
        elif self.retained is not None and self.retained.key.kid in kids:
            self.retained = None
        keep = kids | ({self.retained.key.kid} if self.retained else set())
        self._first_seen = {kid: at for kid, at in self._first_seen.items() if kid in keep}
        for k in keys:
            self._first_seen.setdefault(k.key.kid, now)
        return self._build(now)

    def due(self, current: KeyRing, now: float) -> KeyRing | None:
        """A new ring if the key that should seal now differs from `current`'s (a promotion fell due)."""
        if not self._keys:
            return None
        ring = self._build(now)
        return ring if ring.sealing_kid != current.sealing_kid or ring.kids != current.kids else None

    def _build(self, now: float) -> KeyRing:
        loadable_for = {kid: now - at for kid, at in self._first_seen.items()}
        after = self.promote_after
        if self.retained is not None and any(
            loadable_for.get(k.key.kid, 0.0) >= (after or 0) for k in self._keys
        ):
            self._first_seen.pop(self.retained.key.kid, None)
            self.retained = None  # a loaded key has propagated: the old one may go
        keys = self._keys + ((self.retained,) if self.retained is not None else ())
        current = self._sealing.key.kid if self._sealing is not None else None
        sealing = choose_sealing(keys, loadable_for, self.promote_after, current)
        self._sealing = next(k for k in keys if k.key.kid == sealing)
        return KeyRing([k.key for k in keys], sealing=sealing)

    def describe(self, ring: KeyRing, now: float) -> list[dict[str, object]]:
        """Per key: id, role, whether it seals, seconds loadable here (for logs and /readyz; no secrets)."""
        return [
            {
                "key_id": k.key.kid,
                "name": k.name,
                "role": k.role,
                "sealing": k.key.kid == ring.sealing_kid,
                "loadable_s": round(now - self._first_seen.get(k.key.kid, now), 1),
            }
            for k in self._keys + ((self.retained,) if self.retained is not None else ())
        ]
