"""JSON-RPC 2.0 envelopes: classification, every InvalidMessage (code and carried id), round trips."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.wire import jsonrpc
from proxy.wire.jsonrpc import (
    INVALID_REQUEST,
    PARSE_ERROR,
    Error,
    ErrorObject,
    InvalidMessage,
    Notification,
    Request,
    Result,
    decode,
    dumps,
    parse_message,
    to_json,
    too_deep,
)

V = {"jsonrpc": "2.0"}

# ---------------------------------------------------------------------------------------------------------
# Classification of valid messages
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        pytest.param(
            {**V, "id": 1, "method": "tools/call", "params": {"a": 1}},
            Request(1, "tools/call", {"a": 1}),
            id="request-int-id",
        ),
        pytest.param(
            {**V, "id": "abc", "method": "m"}, Request("abc", "m", {}), id="request-str-id-no-params"
        ),
        pytest.param({**V, "id": 0, "method": "m"}, Request(0, "m", {}), id="request-zero-id"),
        pytest.param({**V, "id": -7, "method": "m"}, Request(-7, "m", {}), id="request-negative-id"),
        pytest.param({**V, "id": "", "method": "m"}, Request("", "m", {}), id="request-empty-str-id"),
        pytest.param({**V, "id": 2**70, "method": "m"}, Request(2**70, "m", {}), id="request-bigint-id"),
        pytest.param(
            {**V, "id": 1, "method": "m", "params": None}, Request(1, "m", {}), id="request-null-params"
        ),
        pytest.param(
            {**V, "id": 1, "method": "m", "params": {}, "extra": True},
            Request(1, "m", {}),
            id="request-unknown-member-ignored",
        ),
        pytest.param(
            {**V, "method": "notifications/initialized"},
            Notification("notifications/initialized", {}),
            id="notification-no-params",
        ),
        pytest.param(
            {**V, "method": "n", "params": None}, Notification("n", {}), id="notification-null-params"
        ),
        pytest.param(
            {**V, "method": "n", "params": {"x": [1]}},
            Notification("n", {"x": [1]}),
            id="notification-params",
        ),
        pytest.param({**V, "id": 3, "result": {}}, Result(3, {}), id="result-int-id"),
        pytest.param({**V, "id": "r", "result": {"k": "v"}}, Result("r", {"k": "v"}), id="result-str-id"),
        pytest.param(
            {**V, "id": 4, "error": {"code": -32601, "message": "nope"}},
            Error(4, ErrorObject(-32601, "nope")),
            id="error-int-id",
        ),
        pytest.param(
            {**V, "id": None, "error": {"code": -32700, "message": "bad"}},
            Error(None, ErrorObject(-32700, "bad")),
            id="error-null-id",
        ),
        pytest.param(
            {**V, "error": {"code": 1, "message": ""}}, Error(None, ErrorObject(1, "")), id="error-no-id"
        ),
        pytest.param(
            {**V, "id": "e", "error": {"code": 5, "message": "m", "data": {"d": 1}}},
            Error("e", ErrorObject(5, "m", {"d": 1})),
            id="error-with-data",
        ),
        pytest.param(
            {**V, "id": "e", "error": {"code": 5, "message": "m", "data": 0}},
            Error("e", ErrorObject(5, "m", 0)),
            id="error-with-falsy-data",
        ),
    ],
)
def test_parse_valid(obj: dict[str, Any], expected: jsonrpc.Message) -> None:
    assert parse_message(obj) == expected


# ---------------------------------------------------------------------------------------------------------
# Every InvalidMessage: code, message fragment, and the request id it carries
# ---------------------------------------------------------------------------------------------------------

NOT_OBJECT = "must be a JSON object (batches are not supported)"
BAD_VERSION = '"jsonrpc" member must be exactly "2.0"'
BAD_ID = '"id" member must be a string or an integer'
BAD_METHOD = '"method" member must be a non-empty string'
BAD_PARAMS = '"params" member must be an object'
RESPONSE_ID = "A response needs a string or integer id"
BAD_RESULT = '"result" member must be an object'
BAD_ERROR = '"error" member must be an object'
BAD_ERROR_FIELDS = "An error needs an integer code and a string message"
UNCLASSIFIED = 'exactly one of "method", "result" or "error"'


@pytest.mark.parametrize(
    ("obj", "fragment", "request_id"),
    [
        pytest.param([{**V, "id": 1, "method": "m"}], NOT_OBJECT, None, id="batch"),
        pytest.param([], NOT_OBJECT, None, id="empty-batch"),
        pytest.param("request", NOT_OBJECT, None, id="string"),
        pytest.param(1, NOT_OBJECT, None, id="number"),
        pytest.param(None, NOT_OBJECT, None, id="null"),
        pytest.param(True, NOT_OBJECT, None, id="bool"),
        pytest.param({"id": 7, "method": "m"}, BAD_VERSION, 7, id="jsonrpc-missing-carries-int-id"),
        pytest.param(
            {"jsonrpc": "1.0", "id": "x", "method": "m"}, BAD_VERSION, "x", id="jsonrpc-1.0-carries-str-id"
        ),
        pytest.param({"jsonrpc": 2.0, "id": 1, "method": "m"}, BAD_VERSION, 1, id="jsonrpc-number"),
        pytest.param(
            {"jsonrpc": "1.0", "id": True, "method": "m"},
            BAD_VERSION,
            None,
            id="jsonrpc-bad-bool-id-not-carried",
        ),
        pytest.param(
            {"jsonrpc": "1.0", "id": 1.5, "method": "m"},
            BAD_VERSION,
            None,
            id="jsonrpc-bad-float-id-not-carried",
        ),
        pytest.param({**V, "id": True, "method": "m"}, BAD_ID, None, id="id-true"),
        pytest.param({**V, "id": False, "method": "m"}, BAD_ID, None, id="id-false"),
        pytest.param({**V, "id": 1.0, "method": "m"}, BAD_ID, None, id="id-float-integral"),
        pytest.param({**V, "id": 1.5, "method": "m"}, BAD_ID, None, id="id-float"),
        pytest.param({**V, "id": [1], "method": "m"}, BAD_ID, None, id="id-array"),
        pytest.param({**V, "id": {"a": 1}, "method": "m"}, BAD_ID, None, id="id-object"),
        pytest.param({**V, "id": True, "result": {}}, BAD_ID, None, id="id-bool-on-result"),
        pytest.param(
            {**V, "id": False, "error": {"code": 1, "message": "m"}}, BAD_ID, None, id="id-bool-on-error"
        ),
        pytest.param({**V, "id": None, "method": "m"}, BAD_ID, None, id="request-null-id"),
        pytest.param({**V, "id": 1, "method": ""}, BAD_METHOD, 1, id="method-empty"),
        pytest.param({**V, "id": "q", "method": 5}, BAD_METHOD, "q", id="method-number"),
        pytest.param({**V, "id": 1, "method": None}, BAD_METHOD, 1, id="method-null"),
        pytest.param({**V, "method": ["m"]}, BAD_METHOD, None, id="notification-method-array"),
        pytest.param({**V, "id": 2, "method": "m", "params": [1, 2]}, BAD_PARAMS, 2, id="params-array"),
        pytest.param({**V, "id": "p", "method": "m", "params": "x"}, BAD_PARAMS, "p", id="params-string"),
        pytest.param({**V, "id": 2, "method": "m", "params": 0}, BAD_PARAMS, 2, id="params-zero"),
        pytest.param({**V, "method": "m", "params": False}, BAD_PARAMS, None, id="notification-params-false"),
        pytest.param({**V, "result": {}}, RESPONSE_ID, None, id="result-no-id"),
        pytest.param({**V, "id": None, "result": {}}, RESPONSE_ID, None, id="result-null-id"),
        pytest.param({**V, "id": 3, "result": None}, BAD_RESULT, 3, id="result-null"),
        pytest.param({**V, "id": 3, "result": []}, BAD_RESULT, 3, id="result-array"),
        pytest.param({**V, "id": "r", "result": "ok"}, BAD_RESULT, "r", id="result-string"),
        pytest.param({**V, "id": 4, "error": "boom"}, BAD_ERROR, 4, id="error-string"),
        pytest.param({**V, "id": 4, "error": None}, BAD_ERROR, 4, id="error-null"),
        pytest.param({**V, "id": 4, "error": {"message": "m"}}, BAD_ERROR_FIELDS, 4, id="error-no-code"),
        pytest.param(
            {**V, "id": 4, "error": {"code": "1", "message": "m"}}, BAD_ERROR_FIELDS, 4, id="error-str-code"
        ),
        pytest.param(
            {**V, "id": 4, "error": {"code": True, "message": "m"}}, BAD_ERROR_FIELDS, 4, id="error-bool-code"
        ),
        pytest.param(
            {**V, "id": 4, "error": {"code": -1.5, "message": "m"}},
            BAD_ERROR_FIELDS,
            4,
            id="error-float-code",
        ),
        pytest.param({**V, "id": 4, "error": {"code": 1}}, BAD_ERROR_FIELDS, 4, id="error-no-message"),
        pytest.param(
            {**V, "id": "e", "error": {"code": 1, "message": 2}},
            BAD_ERROR_FIELDS,
            "e",
            id="error-int-message",
        ),
        pytest.param({**V, "id": 9}, UNCLASSIFIED, 9, id="id-only"),
        pytest.param(dict(V), UNCLASSIFIED, None, id="jsonrpc-only"),
        pytest.param({**V, "id": "z", "params": {}}, UNCLASSIFIED, "z", id="params-without-method"),
    ],
)
def test_parse_invalid(obj: object, fragment: str, request_id: jsonrpc.RequestId | None) -> None:
    with pytest.raises(InvalidMessage) as info:
        parse_message(obj)
    assert info.value.code == INVALID_REQUEST
    assert fragment in str(info.value)
    assert info.value.request_id == request_id
    assert type(info.value.request_id) is type(request_id)  # 1 is not True, "1" is not 1


def test_invalid_message_is_a_value_error() -> None:
    exc = InvalidMessage(PARSE_ERROR, "text", "rid")
    assert isinstance(exc, ValueError)
    assert (exc.code, exc.request_id, str(exc)) == (PARSE_ERROR, "rid", "text")
    assert InvalidMessage(INVALID_REQUEST, "x").request_id is None


# ---------------------------------------------------------------------------------------------------------
# decode
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("payload", "fragment"),
    [
        pytest.param(b"", "JSONDecodeError", id="empty-bytes"),
        pytest.param("", "JSONDecodeError", id="empty-str"),
        pytest.param(b"{", "JSONDecodeError", id="truncated"),
        pytest.param('{"jsonrpc":"2.0",}', "JSONDecodeError", id="trailing-comma"),
        pytest.param(b"\xff\xfe\xfa", "Parse error", id="not-utf8"),
        pytest.param(b'{"jsonrpc":"2.0","id":1,"method":"m"} x', "JSONDecodeError", id="trailing-garbage"),
        pytest.param("\ufeff{}", "JSONDecodeError", id="str-with-bom"),
        pytest.param("[" * 100_000, "RecursionError", id="deep-nesting"),
        pytest.param(
            '{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":' + "[" * 253 + "]" * 253 + "}}",
            "nested deeper than 254 levels",
            id="parses-but-too-deep",
        ),
        pytest.param(
            b'{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":' + b"[" * 990 + b"]" * 990 + b"}}",
            "nested deeper than 254 levels",
            id="parses-but-too-deep-990",
        ),
        pytest.param(
            '{"jsonrpc":"2.0","id":1,"method":"m","params":{"n":'
            + "9" * 30
            + ',"a":'
            + "[" * 300
            + "]" * 300
            + "}}",
            "nested deeper than 254 levels",
            id="too-deep-beside-a-long-integer",
        ),
        pytest.param('{"jsonrpc":"2.0","id":' + "9" * 5000 + ',"method":"m"}', "ValueError", id="huge-int"),
    ],
)
def test_decode_parse_error(payload: bytes | str, fragment: str) -> None:
    with pytest.raises(InvalidMessage) as info:
        decode(payload)
    assert info.value.code == PARSE_ERROR
    assert info.value.request_id is None
    assert str(info.value).startswith("Parse error: ")
    assert fragment in str(info.value)


def test_decode_bytes_and_str() -> None:
    text = '{"jsonrpc":"2.0","id":"é","method":"tools/call","params":{"name":"世界"}}'
    assert decode(text) == decode(text.encode()) == Request("é", "tools/call", {"name": "世界"})


def test_decode_utf8_bom_bytes() -> None:
    assert decode(b'\xef\xbb\xbf{"jsonrpc":"2.0","method":"n"}') == Notification("n", {})


@pytest.mark.parametrize(
    ("payload", "fragment", "request_id"),
    [
        pytest.param(b'[{"jsonrpc":"2.0","id":1,"method":"m"}]', NOT_OBJECT, None, id="batch"),
        pytest.param(b'{"jsonrpc":"2.0","id":true,"method":"m"}', BAD_ID, None, id="bool-id"),
        pytest.param(b'{"jsonrpc":"2.0","id":5,"method":"m","params":[]}', BAD_PARAMS, 5, id="params-array"),
        pytest.param(b"null", NOT_OBJECT, None, id="null"),
    ],
)
def test_decode_invalid_request(payload: bytes, fragment: str, request_id: jsonrpc.RequestId | None) -> None:
    with pytest.raises(InvalidMessage) as info:
        decode(payload)
    assert info.value.code == INVALID_REQUEST
    assert fragment in str(info.value)
    assert info.value.request_id == request_id


# ---------------------------------------------------------------------------------------------------------
# to_json / dumps / error
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("msg", "expected"),
    [
        pytest.param(
            Request(1, "m", {}), {"jsonrpc": "2.0", "id": 1, "method": "m", "params": {}}, id="request"
        ),
        pytest.param(
            Notification("n", {"a": 1}),
            {"jsonrpc": "2.0", "method": "n", "params": {"a": 1}},
            id="notification",
        ),
        pytest.param(
            Result("r", {"x": None}), {"jsonrpc": "2.0", "id": "r", "result": {"x": None}}, id="result"
        ),
        pytest.param(
            Error(None, ErrorObject(-32700, "bad")),
            {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "bad"}},
            id="error-null-id-no-data",
        ),
        pytest.param(
            Error(2, ErrorObject(1, "m", [1])),
            {"jsonrpc": "2.0", "id": 2, "error": {"code": 1, "message": "m", "data": [1]}},
            id="error-with-data",
        ),
        pytest.param(
            Error(2, ErrorObject(1, "m", False)),
            {"jsonrpc": "2.0", "id": 2, "error": {"code": 1, "message": "m", "data": False}},
            id="error-falsy-data-kept",
        ),
    ],
)
def test_to_json(msg: jsonrpc.Message, expected: dict[str, Any]) -> None:
    assert to_json(msg) == expected
    assert json.loads(dumps(msg)) == expected


def test_dumps_is_compact_ascii() -> None:
    """ASCII escapes: whatever decode() accepted (lone surrogates too) can be encoded again."""
    out = dumps(Request(1, "m", {"name": "世界", "n": [1, 2]}))
    assert out == b'{"jsonrpc":"2.0","id":1,"method":"m","params":{"name":"\\u4e16\\u754c","n":[1,2]}}'
    assert json.loads(out)["params"]["name"] == "世界"


def test_a_kept_result_is_written_again_as_it_came() -> None:
    """decode(keep=True): a result the proxy passes on unchanged (the native relay) goes out as the upstream
    wrote it, spacing and all; equality ignores the bytes; a new Result made of it has none."""
    body = b'{"jsonrpc": "2.0", "id": 7, "result": {"content": [], "n": 12345678901234567890}}\n'
    msg = jsonrpc.decode(body, keep=True)
    assert isinstance(msg, jsonrpc.Result) and msg.raw is body
    assert jsonrpc.dumps(msg) is body
    assert msg == jsonrpc.Result(7, {"content": [], "n": 12345678901234567890})
    assert jsonrpc.dumps(jsonrpc.Result(7, {**msg.result, "x": 1})).startswith(b'{"jsonrpc":"2.0"')
    assert jsonrpc.decode(body).raw is None  # type: ignore[union-attr]  # not asked to keep


@pytest.mark.parametrize(
    "body",
    [
        '{"jsonrpc":"2.0","id":1,"result":{"text":"grüße"}}'.encode(),  # not ASCII: written as \\u escapes
        '{"jsonrpc":"2.0","id":1,"result":{}}'.encode("utf-16-le"),  # ASCII with NULs: another encoding
        b'{"jsonrpc":"2.0","id":1,"result":{},"extra":"the client would read this too"}',
    ],
)
def test_a_result_not_kept_as_it_came(body: bytes) -> None:
    msg = jsonrpc.decode(body, keep=True)
    assert isinstance(msg, jsonrpc.Result) and msg.raw is None
    assert jsonrpc.dumps(msg).isascii() and b"extra" not in jsonrpc.dumps(msg)


def test_error_helper() -> None:
    assert jsonrpc.error(3, -32601, "nope") == Error(3, ErrorObject(-32601, "nope"))
    assert jsonrpc.error(None, 1, "x", {"d": 1}) == Error(None, ErrorObject(1, "x", {"d": 1}))


@pytest.mark.parametrize(
    "msg",
    [
        pytest.param(
            Request(1, "tools/call", {"name": "x", "arguments": {"a": [1, 2.5, None, True]}}), id="request"
        ),
        pytest.param(Request("id-é", "m", {}), id="request-str-id"),
        pytest.param(Notification("notifications/progress", {"progress": 1}), id="notification"),
        pytest.param(Result(0, {"content": [{"type": "text", "text": "hi"}]}), id="result"),
        pytest.param(Error(None, ErrorObject(-32700, "parse")), id="error-null-id"),
        pytest.param(Error("x", ErrorObject(-32602, "bad", {"field": "name"})), id="error-data"),
    ],
)
def test_round_trip(msg: jsonrpc.Message) -> None:
    assert decode(dumps(msg)) == msg
    assert parse_message(to_json(msg)) == msg


# ---------------------------------------------------------------------------------------------------------
# Properties
# ---------------------------------------------------------------------------------------------------------

json_scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)
# Objects that look like messages, with each member present or absent and of any JSON type.
member_values = st.sampled_from(["2.0", "m", "", 0, 1, True, None, 1.0]) | json_values
envelopes = st.dictionaries(
    st.sampled_from(["jsonrpc", "id", "method", "params", "result", "error", "code", "message", "data"]),
    member_values,
) | st.fixed_dictionaries(
    {"jsonrpc": st.just("2.0")},
    optional={
        "id": st.integers() | st.text(max_size=4) | st.none() | st.booleans() | st.floats(),
        "method": st.text(max_size=6) | json_values,
        "params": json_values,
        "result": json_values,
        "error": st.fixed_dictionaries(
            {}, optional={"code": json_values, "message": json_values, "data": json_values}
        )
        | json_values,
    },
)


@settings(max_examples=300, deadline=None)
@given(json_values | envelopes)
def test_parse_message_only_raises_invalid_message(obj: object) -> None:
    try:
        msg = parse_message(obj)
    except InvalidMessage as exc:
        assert exc.code == INVALID_REQUEST
        assert exc.request_id is None or (
            isinstance(exc.request_id, str | int) and not isinstance(exc.request_id, bool)
        )
        if exc.request_id is not None:
            assert isinstance(obj, dict)
            assert exc.request_id == obj.get("id")
        return
    assert isinstance(msg, Request | Notification | Result | Error)
    if isinstance(msg, Request | Result):
        assert not isinstance(msg.id, bool)
        assert isinstance(msg.id, str | int)
    if isinstance(msg, Request | Notification):
        assert isinstance(msg.params, dict)
        assert msg.method


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64) | st.text(max_size=64).map(str.encode))
def test_decode_bytes_only_raises_invalid_message(payload: bytes) -> None:
    try:
        decode(payload)
    except InvalidMessage as exc:
        assert exc.code in (PARSE_ERROR, INVALID_REQUEST)


finite_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=10,
)
ids = st.integers() | st.text(max_size=10)
objects = st.dictionaries(st.text(max_size=6), finite_json, max_size=4)
messages = st.one_of(
    st.builds(Request, ids, st.text(min_size=1, max_size=10), objects),
    st.builds(Notification, st.text(min_size=1, max_size=10), objects),
    st.builds(Result, ids, objects),
    st.builds(Error, ids | st.none(), st.builds(ErrorObject, st.integers(), st.text(), finite_json)),
)


@settings(max_examples=300, deadline=None)
@given(messages)
def test_round_trip_property(msg: jsonrpc.Message) -> None:
    assert decode(dumps(msg)) == msg
    assert parse_message(json.loads(json.dumps(to_json(msg)))) == msg


# ---------------------------------------------------------------------------------------------------------
# Bugs
# ---------------------------------------------------------------------------------------------------------


def test_dumps_encodes_everything_decode_accepts() -> None:
    msg = decode(b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"\\ud800"}}')
    assert decode(dumps(msg)) == msg


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_decode_rejects_non_json_numbers(literal: str) -> None:
    with pytest.raises(InvalidMessage) as info:
        decode(f'{{"jsonrpc":"2.0","id":1,"method":"m","params":{{"x":{literal}}}}}')
    assert info.value.code == PARSE_ERROR


@pytest.mark.parametrize(
    "obj",
    [
        pytest.param(
            {**V, "id": 1, "result": {}, "error": {"code": 1, "message": "m"}}, id="result-and-error"
        ),
        pytest.param({**V, "id": 1, "method": "m", "result": {}}, id="method-and-result"),
        pytest.param(
            {**V, "id": 1, "method": "m", "error": {"code": 1, "message": "m"}}, id="method-and-error"
        ),
    ],
)
def test_parse_rejects_ambiguous_members(obj: dict[str, Any]) -> None:
    with pytest.raises(InvalidMessage) as info:
        parse_message(obj)
    assert info.value.code == INVALID_REQUEST
    assert info.value.request_id == 1


# -- the fast codec (orjson) reads and writes exactly what the stdlib does ---------------------------------

_json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()  # beyond 64 bits too: orjson would read those as floats
    | st.floats(allow_nan=False, allow_infinity=False).filter(lambda f: f == 0 or abs(f) >= 1e-4)
    | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(_json_values)
def test_fast_codec_matches_the_stdlib(value: object) -> None:
    text = json.dumps(value, separators=(",", ":"))
    assert jsonrpc.dump_bytes(value) == text.encode()
    for payload in (text, text.encode(), json.dumps(value, ensure_ascii=False).encode()):
        loaded = jsonrpc.loads(payload)
        assert loaded == json.loads(payload)
        assert repr(loaded) == repr(json.loads(payload))  # same types: 1 stays 1, not 1.0


@pytest.mark.parametrize(
    "payload",
    [
        b"123456789012345678901234567890",
        b'"\\ud800"',  # a lone surrogate: the stdlib keeps it
        b"\xef\xbb\xbf{}",  # a UTF-8 BOM
        '{"a":1}'.encode("utf-16"),
        b'{"a":1,"a":2}',
        b"1e400",
    ],
)
def test_what_orjson_refuses_or_reads_differently_is_read_by_the_stdlib(payload: bytes) -> None:
    assert repr(jsonrpc.loads(payload)) == repr(json.loads(payload))


@pytest.mark.parametrize("payload", [b"NaN", b"[Infinity]", b"{", b"\xff"])
def test_fast_codec_refuses_what_the_stdlib_refuses(payload: bytes) -> None:
    with pytest.raises(ValueError):
        jsonrpc.loads(payload)


@pytest.mark.parametrize("value", [float("nan"), [float("inf")], {"a": -float("inf")}])
def test_non_finite_numbers_are_refused_on_the_way_out(value: object) -> None:
    with pytest.raises(ValueError):
        jsonrpc.dump_bytes(value)


def test_lone_surrogates_and_non_ascii_are_written_as_escapes() -> None:
    assert jsonrpc.dump_bytes({"s": "\ud800", "t": "é\x7f"}) == b'{"s":"\\ud800","t":"\\u00e9\\u007f"}'


def test_nesting_at_the_limit_is_a_message_and_writes_again() -> None:
    """254 levels (the envelope and params count) parse and write again; 255 do not parse (the bound that
    keeps a body 990 levels deep from hanging its call in a RecursionError on the way upstream)."""
    body = '{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":' + "[" * 252 + "]" * 252 + "}}"
    msg = decode(body)
    assert dumps(msg) == body.encode()
    wide = '{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":[' + "[1]," * 5000 + "[2]]}}"
    assert isinstance(decode(wide), Request)  # many brackets, little depth
    assert not too_deep(body, json.loads(body))


_DIGIT_RUN = re.compile(r"[0-9]{19}")


@settings(max_examples=300)
@given(
    st.one_of(
        st.text(alphabet=st.sampled_from('0123456789 .-eE"é٣{}'), max_size=80),
        st.binary(max_size=80),
        st.binary(max_size=80).map(lambda b: b.replace(b"\x00", b"1" * 18)),
    )
)
def test_long_digits_is_the_regular_expression(payload: str | bytes) -> None:
    """The run-of-19-digits check that sends a body to the stdlib (`loads`) says what `[0-9]{19}` says, for
    str (ASCII or not: Arabic-Indic digits are not [0-9]) and for any bytes."""
    pattern = _DIGIT_RUN if isinstance(payload, str) else re.compile(rb"[0-9]{19}")
    assert jsonrpc._long_digits(payload) is (pattern.search(payload) is not None)


@pytest.mark.parametrize("payload", [b'{"n":12345678901234567890123}', '{"n":1234567890123456789}'])
def test_long_integers_stay_exact(payload: bytes | str) -> None:
    assert jsonrpc.loads(payload) == json.loads(payload)
    assert isinstance(jsonrpc.loads(payload)["n"], int)
