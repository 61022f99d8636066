"""Authentication between replicas: an HMAC over each forwarded request, keyed from the key ring.

No new secret: each ring key gives a peer key by HKDF-SHA256 (its own salt and info, so a peer MAC never
doubles as anything a sealing key does). The sender signs with the derivation of every key it holds
(a ring has a few), and a receiver accepts the request if one MAC verifies with a key it holds: so a
rotation half-way (one replica has a key another has not yet) never breaks the peer route, and only
replicas with no key in common cannot talk. Each MAC names its key by id (the public id a handle's header
carries too):

    X-Mrtr-Peer-Auth: v1 ts=<unix seconds> <key id>=<base64url HMAC-SHA256>[,<key id>=<mac> …]

over ``v1 \\n method \\n path \\n sha256(body) \\n ts \\n forwarded-by``. The forwarding replica's address
is inside the MAC, so `X-Mrtr-Forwarded-By` is verified, not merely logged. Pure: the time is passed in.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import re

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from .keyring import KeyRing

__all__ = ["MAX_SKEW_S", "PEER_AUTH", "PeerAuthError", "peer_key", "sign", "verify"]

PEER_AUTH = "X-Mrtr-Peer-Auth"
MAX_SKEW_S = 30  # a signed request older or newer than this is refused (clock skew + transit)
_SALT = b"mrtr-proxy peer-auth salt v1"
_INFO = b"mrtr-proxy peer-auth v1"
_MAC = r"[A-Za-z0-9_-]{8}=[A-Za-z0-9_-]{43}"
_HEADER = re.compile(rf"v1 ts=([0-9]{{1,12}}) ({_MAC}(?:,{_MAC}){{0,7}})")


class PeerAuthError(Exception):
    """A peer request failed authentication; `reason` is a short code for logs and metrics."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@functools.lru_cache(maxsize=64)
def peer_key(secret: bytes) -> bytes:
    """The peer-auth key derived from one sealing key (HKDF-SHA256)."""
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=_SALT, info=_INFO).derive(secret)


def _message(method: str, path: str, body: bytes, ts: int, forwarded_by: str) -> bytes:
    digest = hashlib.sha256(body).hexdigest()
    return "\n".join(("v1", method.upper(), path, digest, str(ts), forwarded_by)).encode("utf-8", "replace")


def _mac(key: bytes, message: bytes) -> str:
    return base64.urlsafe_b64encode(hmac.digest(key, message, "sha256")).rstrip(b"=").decode("ascii")


def sign(ring: KeyRing, *, method: str, path: str, body: bytes, forwarded_by: str, now: float) -> str:
    """The `X-Mrtr-Peer-Auth` value for a request this replica sends to a peer."""
    ts = int(now)
    message = _message(method, path, body, ts, forwarded_by)
    keys = sorted(ring.keys, key=lambda k: k.kid != ring.sealing_kid)[:8]  # the sealing key's first
    return f"v1 ts={ts} " + ",".join(f"{k.kid}={_mac(peer_key(k.secret), message)}" for k in keys)


def verify(
    ring: KeyRing,
    header: str | None,
    *,
    method: str,
    path: str,
    body: bytes,
    forwarded_by: str | None,
    now: float,
    max_skew: float = MAX_SKEW_S,
) -> str:
    """Check a peer request; returns the id of the key whose MAC verified. Raises PeerAuthError:
    ``missing``, ``malformed``, ``stale`` (outside `max_skew`), ``unknown_key`` (signed only with keys
    this replica does not hold: the key rings have nothing in common), ``bad_mac``."""
    if not header or forwarded_by is None:
        raise PeerAuthError("missing")
    match = _HEADER.fullmatch(header.strip())
    if match is None:
        raise PeerAuthError("malformed")
    ts = int(match.group(1))
    if abs(now - ts) > max_skew:
        raise PeerAuthError("stale")
    held = {k.kid: k.secret for k in ring.keys}
    macs = [pair.split("=", 1) for pair in match.group(2).split(",")]
    known = [(kid, mac) for kid, mac in macs if kid in held]
    if not known:
        raise PeerAuthError("unknown_key")
    message = _message(method, path, body, ts, forwarded_by)
    for kid, mac in known:
        if hmac.compare_digest(_mac(peer_key(held[kid]), message), mac):
            return kid
    raise PeerAuthError("bad_mac")
