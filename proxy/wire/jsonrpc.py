"""JSON-RPC 2.0 envelopes: parsed once at the boundary into frozen dataclasses.

Params and results stay plain JSON mappings: the proxy relays them, it does not model every MCP type.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import orjson

RequestId = str | int
JSONObject = Mapping[str, Any]

# JSON-RPC 2.0
PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603
# MCP 2026-07-28
HEADER_MISMATCH: Final = -32020
MISSING_CLIENT_CAPABILITY: Final = -32021
UNSUPPORTED_PROTOCOL_VERSION: Final = -32022
# mrtr-proxy's own, outside the range JSON-RPC and MCP reserve (-32768 … -32000)
UPSTREAM_FAILED: Final = -31001
CALL_LOST: Final = -31002
LIMIT_EXCEEDED: Final = -31003
UPSTREAM_TIMEOUT: Final = -31004
SHUTTING_DOWN: Final = -31005
OUTCOME_UNKNOWN: Final = -31010  # the replica holding the call died after it took the input
REPLICA_SHUT_DOWN: Final = -31011  # a running call was cut because its replica shut down
KEY_NOT_HELD: Final = -31012  # requestState sealed with a key this replica does not hold (503: elsewhere)
CANCELLED_BY_OPERATOR: Final = -31013  # an operator cancelled the parked call (proxy/process/admin.py)


@dataclass(frozen=True, slots=True)
class Request:
    id: RequestId
    method: str
    params: JSONObject


@dataclass(frozen=True, slots=True)
class Notification:
    method: str
    params: JSONObject


@dataclass(frozen=True, slots=True)
class Result:
    id: RequestId
    result: JSONObject
    # The bytes it was decoded from, when they are what `dumps` may write for it as they are (`decode`'s
    # `keep`): a relayed answer nothing changed goes to the client as the upstream wrote it, not re-encoded.
    # Whoever changes a result makes a new Result (without them).
    raw: bytes | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class ErrorObject:
    code: int
    message: str
    data: Any = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            out["data"] = self.data
        return out


@dataclass(frozen=True, slots=True)
class Error:
    id: RequestId | None
    error: ErrorObject


Message = Request | Notification | Result | Error
Response = Result | Error


class InvalidMessage(ValueError):
    """A payload that is not one JSON-RPC 2.0 message. `code` is the JSON-RPC error to answer with."""

    def __init__(self, code: int, message: str, request_id: RequestId | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.request_id = request_id


def _is_id(value: object) -> bool:
    return isinstance(value, str | int) and not isinstance(value, bool)


def parse_message(obj: object, raw: bytes | None = None) -> Message:
    """Classify one decoded JSON value as a JSON-RPC message, strictly. `raw`: the text it was decoded
    from, kept by a Result (see `Result.raw`)."""
    if not isinstance(obj, dict):
        raise InvalidMessage(
            INVALID_REQUEST, "A JSON-RPC message must be a JSON object (batches are not supported)"
        )
    raw_id = obj.get("id")
    rid: RequestId | None = raw_id if _is_id(raw_id) else None
    if obj.get("jsonrpc") != "2.0":
        raise InvalidMessage(INVALID_REQUEST, 'The "jsonrpc" member must be exactly "2.0"', rid)
    if "id" in obj and raw_id is not None and rid is None:
        raise InvalidMessage(INVALID_REQUEST, 'The "id" member must be a string or an integer', None)
    if ("method" in obj) + ("result" in obj) + ("error" in obj) != 1:
        raise InvalidMessage(
            INVALID_REQUEST, 'A message has exactly one of "method", "result" or "error"', rid
        )
    if "method" in obj:
        method = obj["method"]
        if not isinstance(method, str) or not method:
            raise InvalidMessage(INVALID_REQUEST, 'The "method" member must be a non-empty string', rid)
        params = obj.get("params", {})
        if params is None:
            params = {}
        if not isinstance(params, dict):
            raise InvalidMessage(INVALID_REQUEST, 'The "params" member must be an object', rid)
        if "id" not in obj:
            return Notification(method, params)
        if rid is None:
            raise InvalidMessage(INVALID_REQUEST, 'The "id" member must be a string or an integer', None)
        return Request(rid, method, params)
    if "result" in obj:
        if rid is None:
            raise InvalidMessage(INVALID_REQUEST, "A response needs a string or integer id")
        result = obj["result"]
        if not isinstance(result, dict):
            raise InvalidMessage(INVALID_REQUEST, 'The "result" member must be an object', rid)
        return Result(rid, result, raw)
    if "error" in obj:
        err = obj["error"]
        if not isinstance(err, dict):
            raise InvalidMessage(INVALID_REQUEST, 'The "error" member must be an object', rid)
        code, message = err.get("code"), err.get("message")
        if not isinstance(code, int) or isinstance(code, bool) or not isinstance(message, str):
            raise InvalidMessage(INVALID_REQUEST, "An error needs an integer code and a string message", rid)
        return Error(rid, ErrorObject(code, message, err.get("data")))
    raise AssertionError("unreachable")  # pragma: no cover


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


# orjson reads integers beyond 64 bits as floats; the stdlib keeps them exact. Any run of 19+ digits (in a
# number or not) takes the stdlib path, so no number changes on its way through.
_LONG_DIGITS_S: Final = re.compile(r"[0-9]{19}")
# Every ASCII digit onto "0", every other byte onto " ": a run of 19 digits is then a plain substring search,
# ~7x fewer instructions than the regular expression's attempt at every position (it ran on every body).
_DIGITS_AS_ZERO: Final = bytes(0x30 if 0x30 <= b <= 0x39 else 0x20 for b in range(256))
_NINETEEN: Final = b"0" * 19


def _long_digits(payload: bytes | bytearray | str) -> bool:
    """Whether `payload` holds a run of 19 ASCII digits (`[0-9]{19}`): a number orjson may read otherwise
    than the stdlib (an integer beyond 64 bits; a float's long mantissa)."""
    if isinstance(payload, str):
        if not payload.isascii():
            return _LONG_DIGITS_S.search(payload) is not None
        payload = payload.encode("ascii")
    return payload.translate(_DIGITS_AS_ZERO).find(_NINETEEN) >= 0  # find, not `in`: see _clean


_STRICT: Final = json.JSONDecoder(parse_constant=_reject_constant)
_ENCODER: Final = json.JSONEncoder(separators=(",", ":"), allow_nan=False)


def loads(payload: bytes | str) -> Any:
    """JSON text to Python, exactly as `json.loads` with NaN/Infinity refused, fast: orjson parses what it
    can (strict RFC 8259, UTF-8); anything it refuses (other encodings, a BOM, lone surrogates, numbers out of
    range) or might read differently (integers beyond 64 bits) goes to the stdlib, which decides. Raises
    ValueError (or RecursionError) like `json.loads`."""
    if not _long_digits(payload):
        try:
            return orjson.loads(payload)
        except orjson.JSONDecodeError:
            pass
    if isinstance(payload, bytes | bytearray):
        payload = payload.decode(json.detect_encoding(payload), "surrogatepass")
    return _STRICT.decode(payload)


def _clean(out: bytes) -> bool:
    """No DEL and no null in orjson's text. `bytes.find`, not `in`: CPython's `bytes.__contains__` first
    tries the needle as an integer and raises (and formats, and clears) a TypeError before it searches:
    ~2,500 instructions per test, three such tests per relayed call's encode and decode."""
    return out.find(b"\x7f") < 0 and out.find(b"null") < 0


def dump_bytes(obj: Any) -> bytes:
    """Compact JSON as `json.dumps(obj, separators=(",", ":"), allow_nan=False)` writes it (ASCII, non-ASCII
    as \\u escapes, lone surrogates kept, NaN/Infinity refused with ValueError), fast: orjson writes it
    unless its text could differ (non-ASCII or DEL in it, a null that may have been a NaN, anything it cannot
    encode), then the stdlib does. The one difference left: a float below 1e-4 in magnitude may be spelled
    another way (0.000025 for 2.5e-05), the same number."""
    try:
        out = orjson.dumps(obj)
    except (orjson.JSONEncodeError, TypeError):
        return _ENCODER.encode(obj).encode()
    if out.isascii() and _clean(out):
        return out
    return _ENCODER.encode(obj).encode()


# Deepest nesting of arrays and objects a message may have. What parses may still have to be written again
# (upstream, to the client, to a log) and walked by recursive code: orjson writes at most 254 levels and the
# stdlib's encoder shares Python's recursion limit, so a body 990 levels deep parsed, then its call hung
# with a RecursionError in the task sending it upstream. Past this, the message is refused as it arrives.
MAX_DEPTH: Final = 254


def decode(payload: bytes | str, *, keep: bool = False) -> Message:
    """Parse JSON text into a message; malformed JSON, or JSON nested deeper than MAX_DEPTH, raises
    InvalidMessage(PARSE_ERROR). `keep`: a Result keeps `payload` (`Result.raw`) when it is ASCII JSON text
    of just the three members, as `dumps` may write it again: no other encoding (UTF-16/32 ASCII has NULs,
    which JSON text never holds), nothing the client would read besides what the proxy read."""
    try:
        obj = loads(payload)
    except (ValueError, RecursionError) as exc:
        raise InvalidMessage(PARSE_ERROR, f"Parse error: {type(exc).__name__}") from None
    if too_deep(payload, obj):
        raise InvalidMessage(PARSE_ERROR, f"Parse error: nested deeper than {MAX_DEPTH} levels")
    raw = None
    if keep and isinstance(payload, bytes) and payload.isascii() and payload.find(b"\x00") < 0:
        raw = payload if isinstance(obj, dict) and len(obj) == 3 else None
    return parse_message(obj, raw)


def too_deep(payload: bytes | str, obj: Any) -> bool:
    """Whether `obj` (parsed from `payload`) nests arrays and objects deeper than MAX_DEPTH. Cheap for what
    is ordinary: fewer brackets than the limit cannot nest past it, and orjson writes exactly what nests
    at most 254 deep; only what it refuses (too deep, an integer beyond 64 bits) is walked, iteratively."""
    opened = (
        payload.count("[") + payload.count("{")
        if isinstance(payload, str)
        else (payload.count(b"[") + payload.count(b"{"))
    )
    if opened <= MAX_DEPTH:
        return False
    try:
        orjson.dumps(obj)
        return False
    except (orjson.JSONEncodeError, TypeError):
        pass
    stack: list[tuple[Any, int]] = [(obj, 0)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict | list):
            if depth >= MAX_DEPTH:
                return True
            children = value.values() if isinstance(value, dict) else value
            stack.extend((child, depth + 1) for child in children)
    return False


def to_json(msg: Message) -> dict[str, Any]:
    match msg:
        case Request(id=rid, method=method, params=params):
            return {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
        case Notification(method=method, params=params):
            return {"jsonrpc": "2.0", "method": method, "params": params}
        case Result(id=rid, result=result):
            return {"jsonrpc": "2.0", "id": rid, "result": result}
        case Error(id=rid, error=error):
            return {"jsonrpc": "2.0", "id": rid, "error": error.to_json()}
    raise TypeError(type(msg).__name__)  # pragma: no cover


def dumps(msg: Message) -> bytes:
    # ASCII escapes: anything decode() accepted (lone surrogates included) encodes.
    if isinstance(msg, Result) and msg.raw is not None:
        return msg.raw
    return dump_bytes(to_json(msg))


def error(rid: RequestId | None, code: int, message: str, data: Any = None) -> Error:
    return Error(rid, ErrorObject(code, message, data))
