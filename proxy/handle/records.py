"""Small sealed records: a few named string fields and an expiry, sealed as compact JSON under one kind's
version byte (formats.py). The relay's wrapped requestState and the mirror's ask ids are such records."""

from __future__ import annotations

import json

from proxy.handle.keyring import HandleError, KeyRing


def seal_record(ring: KeyRing, version: int, fields: dict[str, str], expires_at: int) -> str:
    return ring.seal(json.dumps({**fields, "e": expires_at}, separators=(",", ":")).encode(), version=version)


def open_record(
    ring: KeyRing, token: str, version: int, names: tuple[str, ...], now: float
) -> tuple[tuple[str, ...], int]:
    """The record's fields, in the order of `names`, and its expiry. Raises HandleError: not sealed here
    under `version` (the ring's reasons), `bad_claims` (a field missing or not a string), `expired`."""
    _, plaintext = ring.unseal(token, versions=(version,))
    return parse_record(plaintext, names, now)


def parse_record(plaintext: bytes, names: tuple[str, ...], now: float) -> tuple[tuple[str, ...], int]:
    """A record's fields and expiry from its unsealed JSON; raises HandleError as `open_record` does."""
    try:
        obj = json.loads(plaintext)
        fields = tuple(obj[name] for name in names)
        expires_at = obj["e"]
    except (ValueError, KeyError, TypeError):
        raise HandleError("bad_claims") from None
    if not all(isinstance(f, str) for f in fields) or not isinstance(expires_at, int):
        raise HandleError("bad_claims")
    if now >= expires_at:
        raise HandleError("expired")
    return fields, expires_at
