"""The HMAC between replicas: made from the ring, checked with any ring key, bound to the whole request."""

from __future__ import annotations

import pytest

from proxy.handle import Key, KeyRing
from proxy.handle.peer_auth import PeerAuthError, peer_key, sign, verify

OLD, NEW, OTHER = Key.generate(), Key.generate(), Key.generate()
REQ = {"method": "POST", "path": "/_mrtr/forward/mcp", "body": b'{"jsonrpc":"2.0"}'}


def signed(ring: KeyRing, now: float = 1000.0, by: str = "10.0.0.1:8081") -> str:
    return sign(ring, forwarded_by=by, now=now, **REQ)  # type: ignore[arg-type]


def reason(
    ring: KeyRing, header: str | None, now: float = 1000.0, by: str | None = "10.0.0.1:8081", **over: object
) -> str:
    req = {**REQ, **over}
    with pytest.raises(PeerAuthError) as info:
        verify(ring, header, forwarded_by=by, now=now, **req)  # type: ignore[arg-type]
    return info.value.reason


def test_a_signed_request_verifies_and_names_its_key() -> None:
    ring = KeyRing([OLD])
    assert verify(ring, signed(ring), forwarded_by="10.0.0.1:8081", now=1001.0, **REQ) == OLD.kid  # type: ignore[arg-type]


def test_any_shared_key_verifies_so_rotation_never_breaks_the_route() -> None:
    rotated = KeyRing([NEW, OLD])  # sealing with NEW
    staged = KeyRing([OLD, NEW])  # not rotated yet: NEW staged
    not_yet = KeyRing([OLD])  # the new key has not reached this one yet
    by = "10.0.0.1:8081"
    assert verify(staged, signed(rotated), forwarded_by=by, now=1000.0, **REQ) == NEW.kid  # type: ignore[arg-type]
    assert verify(rotated, signed(staged), forwarded_by=by, now=1000.0, **REQ) == OLD.kid  # type: ignore[arg-type]
    assert verify(not_yet, signed(rotated), forwarded_by=by, now=1000.0, **REQ) == OLD.kid  # type: ignore[arg-type]


def test_refusals() -> None:
    ring = KeyRing([OLD])
    good = signed(ring)
    assert reason(ring, None) == "missing"
    assert reason(ring, good, by=None) == "missing"
    assert reason(ring, "Bearer x") == "malformed"
    assert reason(ring, good, now=1031.0) == "stale"
    assert reason(ring, good, now=969.0) == "stale"
    assert reason(KeyRing([OTHER]), good) == "unknown_key"
    assert reason(ring, good, by="10.0.0.9:8081") == "bad_mac"  # the forwarder is inside the MAC
    assert reason(ring, good, body=b'{"jsonrpc":"2.0","x":1}') == "bad_mac"
    assert reason(ring, good, path="/_mrtr/forward/servers/b/mcp") == "bad_mac"
    assert reason(ring, good, method="GET") == "bad_mac"
    kid = OLD.kid
    forged = good.replace(good.rsplit("=", 1)[1], "A" * 43)
    assert reason(ring, forged) == "bad_mac"
    assert kid in forged


def test_the_peer_key_is_not_the_sealing_key() -> None:
    assert peer_key(OLD.secret) != OLD.secret
    assert len(peer_key(OLD.secret)) == 32
    assert peer_key(OLD.secret) != peer_key(NEW.secret)
