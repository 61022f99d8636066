"""The claims inside a handle, and their strict compact-JSON encoding.

Wire keys: ``u`` upstream, ``s`` legacy session id, ``c`` call id, ``r`` round, ``p`` pending
legacy request ids by input key, ``o`` owner replica, ``e`` last SSE event id (optional),
``w`` principal digest, ``t`` target digest, ``iat`` / ``exp`` unix seconds, ``q`` the call's upstream
request id (optional), ``l`` the span of the call's first round, to link later rounds to (optional: only
when tracing; see proxy/tracing.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from .keyring import HandleError

__all__ = [
    "FORMAT_VERSION",
    "MAX_PENDING",
    "MAX_STR",
    "Claims",
    "FrozenMap",
    "decode_claims",
    "encode_claims",
]

FORMAT_VERSION = 1
MAX_PENDING = 64
MAX_STR = 256
_MAX_INT = 2**63 - 1
_MIN_INT = -(2**63)

_REQUIRED = frozenset({"u", "s", "c", "r", "p", "o", "w", "t", "iat", "exp"})
_ALLOWED = _REQUIRED | {"e", "q", "l"}

JsonRpcId = str | int


class FrozenMap(Mapping[str, JsonRpcId]):
    """A small immutable, hashable ``str -> str | int`` mapping (insertion order kept)."""

    __slots__ = ("_d",)

    def __init__(self, items: Mapping[str, JsonRpcId] | None = None) -> None:
        self._d: dict[str, JsonRpcId] = dict(items or {})

    def __getitem__(self, key: str) -> JsonRpcId:
        return self._d[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._d)

    def __len__(self) -> int:
        return len(self._d)

    def __hash__(self) -> int:
        return hash(frozenset((k, type(v), v) for k, v in self._d.items()))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Mapping):
            return NotImplemented
        if len(other) != len(self._d):
            return False
        # Compare types too: JSON-RPC id 1 and "1" are different ids, and so are 1 and True.
        return all(k in other and type(other[k]) is type(v) and other[k] == v for k, v in self._d.items())

    def __repr__(self) -> str:
        return f"FrozenMap({self._d!r})"


def _check_str(name: str, value: object, *, empty_ok: bool) -> None:
    if type(value) is not str:
        raise TypeError(f"claim {name} must be a str")
    if len(value) > MAX_STR or (not value and not empty_ok):
        raise ValueError(f"claim {name} has a bad length")


def _check_int(name: str, value: object, lo: int, hi: int = _MAX_INT) -> None:
    if type(value) is not int:  # bool is not an int here
        raise TypeError(f"claim {name} must be an int")
    if not lo <= value <= hi:
        raise ValueError(f"claim {name} is out of range")


@dataclass(frozen=True, slots=True)
class Claims:
    """What a handle says about a parked call. Validated on construction (TypeError/ValueError)."""

    upstream: str
    session: str
    call: str
    round: int
    pending: Mapping[str, JsonRpcId]
    owner: str
    principal: str
    target: str
    issued_at: int
    expires_at: int
    last_event: str | None = None
    request: JsonRpcId | None = None  # the call's own upstream JSON-RPC id (to find its response on takeover)
    trace: str | None = None  # the first round's span, "<trace id><span id>" in hex (tracing only)

    def __post_init__(self) -> None:
        _check_str("upstream", self.upstream, empty_ok=False)
        _check_str("session", self.session, empty_ok=True)  # stateless legacy servers have none
        _check_str("call", self.call, empty_ok=False)
        _check_int("round", self.round, 0)
        _check_str("owner", self.owner, empty_ok=True)
        _check_str("principal", self.principal, empty_ok=False)
        _check_str("target", self.target, empty_ok=False)
        _check_int("issued_at", self.issued_at, 0)
        _check_int("expires_at", self.expires_at, self.issued_at)
        if self.last_event is not None:
            _check_str("last_event", self.last_event, empty_ok=True)
        if type(self.request) is int:
            _check_int("request", self.request, _MIN_INT)
        elif self.request is not None:
            _check_str("request", self.request, empty_ok=True)
        if self.trace is not None:
            _check_str("trace", self.trace, empty_ok=False)
        if not isinstance(self.pending, Mapping):
            raise TypeError("claim pending must be a mapping")
        if len(self.pending) > MAX_PENDING:
            raise ValueError("claim pending has too many entries")
        for key, rid in self.pending.items():
            _check_str("pending key", key, empty_ok=False)
            if type(rid) is int:
                _check_int("pending id", rid, _MIN_INT)
            else:
                _check_str("pending id", rid, empty_ok=True)
        if type(self.pending) is not FrozenMap:
            object.__setattr__(self, "pending", FrozenMap(self.pending))


_STDLIB = json.JSONEncoder(separators=(",", ":"), ensure_ascii=True, allow_nan=False)


def _encode(obj: dict[str, Any]) -> bytes:
    """The one spelling of a claims object: compact, ASCII-only JSON (so any str round-trips), as the stdlib
    writes it. orjson writes the same bytes when its output is ASCII without DEL (claims hold no floats or
    nulls); otherwise (non-ASCII, a lone surrogate) the stdlib writes it."""
    try:
        out = orjson.dumps(obj)
    except orjson.JSONEncodeError:
        out = b""
    if out and out.isascii() and b"\x7f" not in out:
        return out
    return _STDLIB.encode(obj).encode("ascii")


def encode_claims(c: Claims) -> bytes:
    """Compact JSON with short keys; the optional ones (``e``, ``q``, ``l``) left out when None."""
    obj: dict[str, Any] = {
        "u": c.upstream,
        "s": c.session,
        "c": c.call,
        "r": c.round,
        "p": dict(c.pending),
        "o": c.owner,
        "w": c.principal,
        "t": c.target,
        "iat": c.issued_at,
        "exp": c.expires_at,
    }
    if c.last_event is not None:
        obj["e"] = c.last_event
    if c.request is not None:
        obj["q"] = c.request
    if c.trace is not None:
        obj["l"] = c.trace
    return _encode(obj)


def _load(b: bytes) -> Any:
    try:
        return orjson.loads(b)
    except orjson.JSONDecodeError:  # e.g. a lone surrogate escape, which the stdlib reads
        return json.loads(b)


def _parse(b: bytes) -> Claims | None:
    try:
        obj = _load(b)
        if type(obj) is not dict or not _REQUIRED <= obj.keys() <= _ALLOWED:
            return None
        if type(obj["p"]) is not dict or ("e" in obj and type(obj["e"]) is not str):
            return None
        if "q" in obj and type(obj["q"]) not in (int, str):
            return None
        if "l" in obj and type(obj["l"]) is not str:
            return None
        # Spelled as `encode_claims` spells it (compact ASCII JSON, each value's one spelling): this refuses
        # duplicate keys (they re-encode shorter), whitespace, escapes spelled another way, NaN/Infinity (they
        # do not encode) and raw non-ASCII.
        if _encode(obj) != b:
            return None
        return Claims(
            upstream=obj["u"],
            session=obj["s"],
            call=obj["c"],
            round=obj["r"],
            pending=obj["p"],
            owner=obj["o"],
            principal=obj["w"],
            target=obj["t"],
            issued_at=obj["iat"],
            expires_at=obj["exp"],
            last_event=obj.get("e"),
            request=obj.get("q"),
            trace=obj.get("l"),
        )
    except (ValueError, TypeError, RecursionError):
        return None


def decode_claims(b: bytes) -> Claims:
    """Strictly decode claims; anything off raises ``HandleError("bad_claims")`` (no chained cause)."""
    claims = _parse(b) if isinstance(b, bytes | bytearray) else None
    if claims is None:
        raise HandleError("bad_claims")
    return claims
