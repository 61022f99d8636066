"""The claims inside a handle, and their strict compact-JSON encoding.

Wire keys: ``u`` upstream, ``s`` legacy session id, ``c`` call id, ``r`` round, ``p`` pending
legacy request ids by input key, ``o`` owner replica, ``e`` last SSE event id (optional),
``w`` principal digest, ``t`` target digest, ``iat`` / ``exp`` unix seconds, ``q`` the call's upstream
request id (optional), ``l`` the span of the call's first round, to link later rounds to (optional: only
when tracing; see proxy/observe/tracing.py), ``h`` the keys of ``p`` whose id is a digest (optional).

Request ids are the upstream's: JSON-RPC lets a string id be of any length, and a handle carries at most
MAX_STR characters of one. A longer one is carried as its digest (`carried_ids`), its key listed in ``h``;
the replica holding the call keeps the id itself and checks the digest against it. Only a handle with a
digested id has ``h``: every other handle is spelled as before it existed (format 1 both ways), and one
that has it is refused by a replica older than it (its calls could not be parked at all there).
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from proxy.handle import formats

from .keyring import HandleError

__all__ = [
    "FORMAT_VERSION",
    "MAX_PENDING",
    "MAX_STR",
    "Claims",
    "FrozenMap",
    "carried_ids",
    "carried_session",
    "decode_claims",
    "encode_claims",
    "id_digest",
]

FORMAT_VERSION = formats.CALL_HANDLE
MAX_PENDING = 64
MAX_STR = 256
_MAX_INT = 2**63 - 1
_MIN_INT = -(2**63)

JsonRpcId = str | int


def id_digest(rid: str) -> str:
    """What a handle carries for a string request id longer than MAX_STR (44 characters); the handle's
    ``h`` says which of its ids are digests."""
    raw = hashlib.sha256(b"mrtr-proxy request id\0" + rid.encode("utf-8", "surrogatepass")).digest()
    return "#" + base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def carried_session(session_id: str) -> str:
    """The upstream's session id as a handle carries it: itself, or its digest when longer than MAX_STR
    (then only the replica holding the call can tell it, and the call cannot be taken over)."""
    return session_id if len(session_id) <= MAX_STR else id_digest(session_id)


def carried_ids(pending: Mapping[str, JsonRpcId]) -> tuple[dict[str, JsonRpcId], tuple[str, ...]]:
    """The pending ids as a handle carries them, and the keys (sorted) whose id is carried as its digest."""
    carried = dict(pending)
    hashed = []
    for key, rid in pending.items():
        if type(rid) is str and len(rid) > MAX_STR:
            carried[key] = id_digest(rid)
            hashed.append(key)
    return carried, tuple(sorted(hashed))


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

    @classmethod
    def adopt(cls, d: dict[str, JsonRpcId]) -> FrozenMap:
        """Wrap ``d`` without a copy: for a dict nobody else holds (one just parsed)."""
        return _adopt(d)

    def as_json_object(self) -> dict[str, JsonRpcId]:
        """The entries as the dict they are kept in, for an encoder to read (not to change): no copy."""
        return self._d


def _adopt(d: dict[str, JsonRpcId]) -> FrozenMap:
    m = _new_object(FrozenMap)
    m._d = d
    return m


_new_object = object.__new__


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


@dataclass(frozen=True, init=False)
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
    hashed: tuple[str, ...] = ()  # keys of `pending` whose id is carried as its digest (carried_ids)

    def __init__(  # noqa: PLR0917 - positional as the dataclass init it replaces
        self,
        upstream: str,
        session: str,
        call: str,
        round: int,
        pending: Mapping[str, JsonRpcId],
        owner: str,
        principal: str,
        target: str,
        issued_at: int,
        expires_at: int,
        last_event: str | None = None,
        request: JsonRpcId | None = None,
        trace: str | None = None,
        hashed: tuple[str, ...] = (),
    ) -> None:
        # Written out rather than generated: a handle is built on every parked round and every retry, and one
        # inlined pass over the arguments (then one store of them all) costs a third less than the dataclass
        # __init__ plus a __post_init__. Anything the pass does not accept goes through `_check_each`, the
        # same rules claim by claim, which raises naming the bad one (TypeError/ValueError) or accepts it.
        # A FrozenMap is checked through the dict it keeps (its Mapping methods are Python calls).
        entries = pending._d if type(pending) is FrozenMap else pending
        if not (
            type(upstream) is str
            and 0 < len(upstream) <= MAX_STR
            and type(session) is str  # stateless legacy servers have none: may be empty
            and len(session) <= MAX_STR
            and type(call) is str
            and 0 < len(call) <= MAX_STR
            and type(owner) is str
            and len(owner) <= MAX_STR
            and type(principal) is str
            and 0 < len(principal) <= MAX_STR
            and type(target) is str
            and 0 < len(target) <= MAX_STR
            and type(round) is int  # bool is not an int here
            and 0 <= round <= _MAX_INT
            and type(issued_at) is int
            and type(expires_at) is int
            and 0 <= issued_at <= expires_at <= _MAX_INT
            and (last_event is None or (type(last_event) is str and len(last_event) <= MAX_STR))
            and (trace is None or (type(trace) is str and 0 < len(trace) <= MAX_STR))
            and (
                request is None
                or (type(request) is str and len(request) <= MAX_STR)
                or (type(request) is int and _MIN_INT <= request <= _MAX_INT)
            )
            and _plain_pending(entries)
            and (not hashed or _plain_hashed(hashed, entries))
        ):
            _check_each(
                (upstream, session, call, round, owner, principal, target, issued_at, expires_at),
                (last_event, request, trace),
                pending,
                hashed,
            )
        # Stored in one go (the frozen class refuses plain assignment; object.__setattr__ per field costs
        # three times as much, and a handle is built on every parked round and every retry).
        self.__dict__.update(
            upstream=upstream,
            session=session,
            call=call,
            round=round,
            pending=pending if type(pending) is FrozenMap else _adopt(dict(pending)),
            owner=owner,
            principal=principal,
            target=target,
            issued_at=issued_at,
            expires_at=expires_at,
            last_event=last_event,
            request=request,
            trace=trace,
            hashed=hashed,
        )


def _plain_hashed(hashed: object, pending: object) -> bool:
    """A sorted tuple of distinct keys of `pending` (a dict), each naming a str id."""
    if type(hashed) is not tuple or type(pending) is not dict or list(hashed) != sorted(set(hashed)):
        return False
    return all(type(key) is str and type(pending.get(key)) is str for key in hashed)


def _plain_pending(pending: object) -> bool:
    """A dict of at most MAX_PENDING entries, each a key of 1..MAX_STR characters and an id a handle
    carries (anything else, a FrozenMap's own dict aside, goes through `_check_each`)."""
    if type(pending) is not dict:
        return False
    if len(pending) > MAX_PENDING:
        return False
    for key, rid in pending.items():
        if type(key) is not str or not 0 < len(key) <= MAX_STR:
            return False
        if type(rid) is int:
            if not _MIN_INT <= rid <= _MAX_INT:
                return False
        elif type(rid) is not str or len(rid) > MAX_STR:
            return False
    return True


def _check_each(
    required: tuple[object, ...], optional: tuple[object, ...], pending: object, hashed: object
) -> None:
    """Check claim by claim; raises TypeError/ValueError naming the first bad one."""
    upstream, session, call, rnd, owner, principal, target, issued_at, expires_at = required
    last_event, request, trace = optional
    _check_str("upstream", upstream, empty_ok=False)
    _check_str("session", session, empty_ok=True)
    _check_str("call", call, empty_ok=False)
    _check_int("round", rnd, 0)
    _check_str("owner", owner, empty_ok=True)
    _check_str("principal", principal, empty_ok=False)
    _check_str("target", target, empty_ok=False)
    _check_int("issued_at", issued_at, 0)
    _check_int("expires_at", expires_at, issued_at)  # type: ignore[arg-type]  # an int: checked just above
    if last_event is not None:
        _check_str("last_event", last_event, empty_ok=True)
    if type(request) is int:
        _check_int("request", request, _MIN_INT)
    elif request is not None:
        _check_str("request", request, empty_ok=True)
    if trace is not None:
        _check_str("trace", trace, empty_ok=False)
    if not isinstance(pending, Mapping):
        raise TypeError("claim pending must be a mapping")
    if len(pending) > MAX_PENDING:
        raise ValueError("claim pending has too many entries")
    for key, rid in pending.items():
        _check_str("pending key", key, empty_ok=False)
        if type(rid) is int:
            _check_int("pending id", rid, _MIN_INT)
        else:
            _check_str("pending id", rid, empty_ok=True)
    if hashed and not _plain_hashed(hashed, dict(pending)):
        raise ValueError("claim hashed must name str ids of pending, sorted, once each")


_STDLIB = json.JSONEncoder(separators=(",", ":"), ensure_ascii=True, allow_nan=False)


def encode_claims(c: Claims) -> bytes:
    """Compact JSON with short keys; the optional ones (``e``, ``q``, ``l``; ``h``) left out when None
    (empty). The one spelling of a claims object: compact, ASCII-only JSON (so any str round-trips), as the
    stdlib writes it. orjson writes the same bytes when its output is ASCII without DEL (claims hold no floats
    or nulls); otherwise (non-ASCII, a lone surrogate) the stdlib writes it."""
    obj: dict[str, Any] = {
        "u": c.upstream,
        "s": c.session,
        "c": c.call,
        "r": c.round,
        "p": c.pending._d if type(c.pending) is FrozenMap else dict(c.pending),  # no copy: only read
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
    if c.hashed:
        obj["h"] = list(c.hashed)
    try:  # runs twice per handle: sealed, and opened (to check the spelling)
        out = orjson.dumps(obj)
    except orjson.JSONEncodeError:
        return _STDLIB.encode(obj).encode("ascii")
    if out.isascii() and b"\x7f" not in out:
        return out
    return _STDLIB.encode(obj).encode("ascii")


def _parse(b: bytes) -> Claims | None:
    try:
        try:
            obj = orjson.loads(b)
        except orjson.JSONDecodeError:  # e.g. a lone surrogate escape, which the stdlib reads
            obj = json.loads(b)
        if type(obj) is not dict:
            return None
        p, h = obj["p"], obj.get("h")
        claims = Claims(
            obj["u"],
            obj["s"],
            obj["c"],
            obj["r"],
            _adopt(p) if type(p) is dict else p,  # just parsed: nobody else holds it
            obj["o"],
            obj["w"],
            obj["t"],
            obj["iat"],
            obj["exp"],
            obj.get("e"),
            obj.get("q"),
            obj.get("l"),
            () if h is None else tuple(h) if type(h) is list else h,
        )
        # Spelled exactly as `encode_claims` spells these claims (their keys in its order, an optional one
        # left out rather than null or empty, compact ASCII JSON, each value's one spelling): this refuses an
        # unknown, missing or reordered key, duplicate keys, whitespace, escapes spelled another way,
        # NaN/Infinity and raw non-ASCII. A bad claim is a TypeError/ValueError from Claims.
        return claims if encode_claims(claims) == b else None
    except (ValueError, TypeError, KeyError, RecursionError):
        return None


def decode_claims(b: bytes) -> Claims:
    """Strictly decode claims; anything off raises ``HandleError("bad_claims")`` (no chained cause)."""
    claims = _parse(b) if type(b) is bytes or isinstance(b, bytearray) else None
    if claims is None:
        raise HandleError("bad_claims")
    return claims
