"""Seal and open handles (``requestState``), and the digests that bind them to a caller and request."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections.abc import Callable, Mapping
from typing import Any

from .claims import FORMAT_VERSION, Claims, decode_claims, encode_claims
from .keyring import HandleError, KeyRing

__all__ = ["ANONYMOUS", "MAX_CLOCK_SKEW", "HandleCodec", "principal_digest", "target_digest"]

ANONYMOUS = "anonymous"
MAX_CLOCK_SKEW = 60
_DIGEST_CHARS = 22  # 132 bits


class HandleCodec:
    """Claims <-> opaque token. ``open`` checks integrity and time; ``verify`` checks the binding."""

    __slots__ = ("_clock", "_ring")

    def __init__(self, ring: KeyRing, clock: Callable[[], float] = time.time) -> None:
        self._ring = ring
        self._clock = clock

    @property
    def ring(self) -> KeyRing:
        return self._ring

    def replace_ring(self, new_ring: KeyRing) -> None:
        """Swap keys (rotation). Keep the old sealing key in ``new_ring`` so parked calls still open."""
        self._ring = new_ring

    def seal(self, claims: Claims) -> str:
        return self._ring.seal(encode_claims(claims), version=FORMAT_VERSION)

    def open(self, token: str) -> Claims:
        """Unseal, decode and time-check a token. Raises HandleError only."""
        _, plaintext = self._ring.unseal(token, versions=(FORMAT_VERSION,))
        claims = decode_claims(plaintext)
        now = self._clock()
        if now >= claims.expires_at:
            raise HandleError("expired")
        if claims.issued_at > now + MAX_CLOCK_SKEW:
            raise HandleError("not_yet_valid")
        return claims

    @staticmethod
    def verify(claims: Claims, *, upstream: str, principal: str, target: str) -> None:
        """Check the handle is presented to the same upstream, by the same principal, for the same request."""
        if not _same(claims.upstream, upstream):
            raise HandleError("wrong_upstream")
        if not _same(claims.principal, principal):
            raise HandleError("wrong_principal")
        if not _same(claims.target, target):
            raise HandleError("wrong_target")


def _utf8(s: str) -> bytes:
    return s.encode("utf-8", "surrogatepass")


def _same(a: str, b: str) -> bool:
    try:  # compare_digest takes ASCII str as it is, without two encodes; any other str is a TypeError
        return hmac.compare_digest(a, b)
    except TypeError:
        return hmac.compare_digest(_utf8(a), _utf8(b))


def _digest(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest())[:_DIGEST_CHARS].decode("ascii")


def principal_digest(authorization: str | None) -> str:
    """Digest of the Authorization header value; ``"anonymous"`` when absent or empty."""
    if not authorization:
        return ANONYMOUS
    return _digest(b"mrtr-proxy principal\0" + _utf8(authorization))


def target_digest(method: str, params: Mapping[str, Any]) -> str:
    """Digest of method + name/uri + arguments for tools/call, prompts/get, resources/read.

    Raises ValueError for any other method or a missing/non-str name or uri.
    """
    if method in ("tools/call", "prompts/get"):
        name = params.get("name")
        args = params.get("arguments") or {}
    elif method == "resources/read":
        name = params.get("uri")
        args = {}
    else:
        raise ValueError(f"no target digest for method {method!r}")
    if not isinstance(name, str):
        raise ValueError(f"{method} params need a str {'uri' if method == 'resources/read' else 'name'}")
    canonical = _CANONICAL.encode({"m": method, "n": name, "a": args})
    return _digest(b"mrtr-proxy target\0" + _utf8(canonical))


# What json.dumps(sort_keys=True, separators=(",", ":"), ensure_ascii=False) writes, from one encoder made
# once: json.dumps makes a new one for every call with options (a quarter of the digest's cost), and the
# digest is taken twice per round trip (sealed when a call parks, checked when its retry comes).
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)
