"""Claims: exact round trips and strict decoding."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from proxy.handle import Claims, FrozenMap, HandleError, carried_ids, decode_claims, encode_claims, id_digest
from proxy.handle.claims import MAX_PENDING, MAX_STR

BASE = Claims(
    upstream="github",
    session="sess-1",
    call="call-1",
    round=2,
    pending={"confirm": 7, "token": "req-8"},
    owner="10.0.0.5:8080",
    principal="p" * 22,
    target="t" * 22,
    issued_at=1_700_000_000,
    expires_at=1_700_000_300,
    last_event="ev-9",
)
BASE_WIRE: dict[str, Any] = json.loads(encode_claims(BASE))


def test_encoding_is_compact_with_short_keys() -> None:
    assert encode_claims(BASE) == (
        b'{"u":"github","s":"sess-1","c":"call-1","r":2,"p":{"confirm":7,"token":"req-8"},'
        b'"o":"10.0.0.5:8080","w":"pppppppppppppppppppppp","t":"tttttttttttttttttttttt",'
        b'"iat":1700000000,"exp":1700000300,"e":"ev-9"}'
    )
    no_event = dataclasses.replace(BASE, last_event=None)
    assert b'"e"' not in encode_claims(no_event)
    assert decode_claims(encode_claims(no_event)) == no_event
    assert b'"l"' not in encode_claims(BASE)  # no trace claim unless tracing


def test_trace_claim_round_trips() -> None:
    ref = "0af7651916cd43dd8448eb211c80319c" + "b7ad6b7169203331"
    traced = dataclasses.replace(BASE, trace=ref)
    assert encode_claims(traced).endswith(b',"l":"' + ref.encode() + b'"}')
    assert decode_claims(encode_claims(traced)) == traced
    assert decode_claims(encode_claims(traced)).trace == ref


def test_an_id_too_long_to_carry_goes_as_its_digest_and_h_names_it() -> None:
    long_id = "x" * (MAX_STR + 1)
    carried, hashed = carried_ids(
        {"elicit-1": long_id, "elicit-2": "short", "roots-3": 7, "e-4": "y" * MAX_STR}
    )
    assert carried == {
        "elicit-1": id_digest(long_id),
        "elicit-2": "short",
        "roots-3": 7,
        "e-4": "y" * MAX_STR,
    }
    assert hashed == ("elicit-1",)
    assert len(id_digest(long_id)) == 44 and id_digest(long_id) != id_digest(long_id + "x")
    c = dataclasses.replace(BASE, pending=carried, hashed=hashed)
    assert encode_claims(c).endswith(b',"e":"ev-9","h":["elicit-1"]}')
    assert decode_claims(encode_claims(c)) == c
    assert decode_claims(encode_claims(c)).hashed == ("elicit-1",)
    # With no id too long, nothing changes: the handle is spelled as before `h` existed.
    assert carried_ids({"a": 1, "b": "s"}) == ({"a": 1, "b": "s"}, ())
    assert b'"h"' not in encode_claims(BASE)


@pytest.mark.parametrize(
    "hashed",
    [("nope",), ("token", "confirm"), ("confirm",), ("token", "token"), ["token"]],
    ids=["unknown key", "unsorted", "int id", "twice", "a list"],
)
def test_h_must_name_str_ids_of_pending_sorted_once_each(hashed: Any) -> None:
    with pytest.raises((TypeError, ValueError)):
        dataclasses.replace(BASE, hashed=hashed)


def test_round_trip_keeps_id_types() -> None:
    c = dataclasses.replace(BASE, pending={"a": 1, "b": "1", "c": -5, "d": "", "e": 2**63 - 1})
    back = decode_claims(encode_claims(c))
    assert back == c
    assert [type(v) for v in back.pending.values()] == [int, str, int, str, int]
    assert back != dataclasses.replace(c, pending={"a": "1", "b": "1", "c": -5, "d": "", "e": 2**63 - 1})


def test_odd_strings_round_trip() -> None:
    c = dataclasses.replace(BASE, session="\ud800 é \x00 \u2028 \"'\\", pending={"ключ": "\udfff"})
    assert decode_claims(encode_claims(c)) == c


def test_claims_are_frozen_and_hashable() -> None:
    src = {"a": 1}
    c = dataclasses.replace(BASE, pending=src)
    src["b"] = 2
    assert dict(c.pending) == {"a": 1}
    assert isinstance(c.pending, FrozenMap)
    with pytest.raises(TypeError):
        c.pending["x"] = 1  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.round = 3  # type: ignore[misc]
    assert hash(c) == hash(dataclasses.replace(BASE, pending={"a": 1}))
    assert {c, dataclasses.replace(BASE, pending={"a": 1})} == {c}
    assert FrozenMap({"a": 1}) != FrozenMap({"a": True}) and FrozenMap({"a": 1}) != {"a": 1.0}
    assert FrozenMap({"a": 1}) == {"a": 1}


@pytest.mark.parametrize(
    "kwargs",
    [
        {"round": True},
        {"round": -1},
        {"round": 1.0},
        {"upstream": ""},
        {"call": ""},
        {"principal": ""},
        {"target": ""},
        {"upstream": "x" * (MAX_STR + 1)},
        {"session": None},
        {"last_event": 5},
        {"trace": ""},
        {"trace": 5},
        {"trace": "x" * (MAX_STR + 1)},
        {"pending": [("a", 1)]},
        {"pending": {"a": 1.5}},
        {"pending": {"a": True}},
        {"pending": {"a": None}},
        {"pending": {"": 1}},
        {"pending": {1: 1}},
        {"pending": {"a": 2**63}},
        {"pending": {str(i): i for i in range(MAX_PENDING + 1)}},
        {"expires_at": 1_600_000_000},
        {"issued_at": -1},
    ],
)
def test_constructor_rejects(kwargs: dict[str, Any]) -> None:
    with pytest.raises((TypeError, ValueError)):
        dataclasses.replace(BASE, **kwargs)


def wire(**changes: Any) -> bytes:
    obj = dict(BASE_WIRE)
    for k, v in changes.items():
        if v is _DROP:
            del obj[k]
        else:
            obj[k] = v
    return json.dumps(obj, separators=(",", ":")).encode()  # the one spelling decode_claims accepts


_DROP = object()

BAD_WIRE: list[tuple[str, bytes]] = [
    ("bool round", wire(r=True)),
    ("float round", wire(r=2.0)),
    ("str round", wire(r="2")),
    ("negative round", wire(r=-1)),
    ("float id", wire(p={"a": 1.0})),
    ("bool id", wire(p={"a": False})),
    ("null id", wire(p={"a": None})),
    ("list id", wire(p={"a": [1]})),
    ("object id", wire(p={"a": {"id": 1}})),
    ("huge id", wire(p={"a": 2**64})),
    ("too many pending", wire(p={str(i): i for i in range(MAX_PENDING + 1)})),
    ("pending list", wire(p=[["a", 1]])),
    ("pending null", wire(p=None)),
    ("nested junk", wire(u={"x": [1, {"y": None}]})),
    ("null e", wire(e=None)),
    ("int e", wire(e=1)),
    ("null l", wire(l=None)),
    ("null q", wire(q=None)),
    ("keys reordered", json.dumps(dict(reversed(BASE_WIRE.items())), separators=(",", ":")).encode()),
    ("int l", wire(l=1)),
    ("null h", wire(h=None)),
    ("empty h", wire(h=[])),
    ("str h", wire(h="token")),
    ("object h", wire(h={"token": 1})),
    ("h twice", wire(h=["token", "token"])),
    ("int h", wire(h=0)),
    ("h of unknown key", wire(h=["nope"])),
    ("h of int id", wire(h=["confirm"])),
    ("h unsorted", wire(p={"a": "1", "b": "2"}, h=["b", "a"])),
    ("h before l", wire(h=["token"], l="abc")),
    ("empty l", wire(l="")),
    ("long str", wire(s="x" * (MAX_STR + 1))),
    ("empty upstream", wire(u="")),
    ("float iat", wire(iat=1_700_000_000.5)),
    ("exp before iat", wire(exp=1)),
    ("extra key", wire(x=1)),
    ("version inside", wire(v=1)),
    *[(f"missing {k}", wire(**{k: _DROP})) for k in BASE_WIRE if k != "e"],
    ("duplicate key", encode_claims(BASE)[:-1] + b',"u":"other"}'),
    ("duplicate pending key", wire(p={"a": 1}).replace(b'{"a":1}', b'{"a":1,"a":2}')),
    ("spaces", json.dumps(BASE_WIRE).encode()),
    ("escaped ascii", wire(u="github").replace(b'"github"', b'"\\u0067ithub"')),
    ("raw non-ascii", wire(u="gitłab").replace(b"\\u0142", "ł".encode())),
    ("NaN", wire(r=float("nan"))),
    ("Infinity", wire(iat=float("inf"))),
    ("not json", b"not json"),
    ("empty", b""),
    ("list", b"[]"),
    ("string", b'"x"'),
    ("number", b"1"),
    ("null", b"null"),
    ("invalid utf-8", b'{"u":"\xff"}'),
    ("deep nesting", b"[" * 100_000 + b"]" * 100_000),
    ("giant int", b'{"r":' + b"9" * 5000 + b"}"),
    ("trailing data", encode_claims(BASE) + b"x"),
]


@pytest.mark.parametrize("data", [b[1] for b in BAD_WIRE], ids=[b[0] for b in BAD_WIRE])
def test_decode_rejects(data: bytes) -> None:
    with pytest.raises(HandleError) as info:
        decode_claims(data)
    assert info.value.reason == "bad_claims"
    assert str(info.value) == "bad_claims"
    assert info.value.__cause__ is None and info.value.__context__ is None


def test_decode_rejects_non_bytes() -> None:
    with pytest.raises(HandleError):
        decode_claims("{}")  # type: ignore[arg-type]


def test_wire_helper_sanity() -> None:
    assert decode_claims(wire()) == BASE


# --- property tests ------------------------------------------------------------------------------

# All of Unicode, lone surrogates included (json.loads can produce them from "\ud800").
chars = st.characters(codec=None, exclude_categories=()) | st.sampled_from('\ud800\udfff\x00"\\\u2028é')
any_text = st.text(chars, max_size=MAX_STR)
nonempty_text = st.text(chars, min_size=1, max_size=MAX_STR)
ints64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
timestamps = st.integers(min_value=0, max_value=2**40)


@st.composite
def claims_strategy(draw: st.DrawFn) -> Claims:
    iat = draw(timestamps)
    return Claims(
        upstream=draw(nonempty_text),
        session=draw(any_text),
        call=draw(nonempty_text),
        round=draw(st.integers(min_value=0, max_value=2**31)),
        pending=draw(st.dictionaries(nonempty_text, st.one_of(ints64, any_text), max_size=MAX_PENDING)),
        owner=draw(any_text),
        principal=draw(nonempty_text),
        target=draw(nonempty_text),
        issued_at=iat,
        expires_at=iat + draw(st.integers(min_value=0, max_value=10**6)),
        last_event=draw(st.none() | any_text),
        trace=draw(st.none() | nonempty_text),
    )


@given(claims_strategy())
def test_valid_claims_round_trip_exactly(c: Claims) -> None:
    back = decode_claims(encode_claims(c))
    assert back == c
    assert [(k, type(v), v) for k, v in back.pending.items()] == [
        (k, type(v), v) for k, v in c.pending.items()
    ]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=5), children, max_size=5)
    ),
    max_leaves=20,
)


@given(json_values)
def test_arbitrary_json_only_raises_handle_error(value: Any) -> None:
    try:
        decode_claims(json.dumps(value).encode())
    except HandleError as e:
        assert e.reason == "bad_claims"


@given(st.fixed_dictionaries({k: json_values for k in BASE_WIRE}))
def test_claims_shaped_junk_only_raises_handle_error(obj: dict[str, Any]) -> None:
    try:
        c = decode_claims(json.dumps(obj).encode())
    except HandleError as e:
        assert e.reason == "bad_claims"
    else:
        assert decode_claims(encode_claims(c)) == c


@given(st.dictionaries(st.sampled_from(sorted(BASE_WIRE)), json_values).map(lambda d: {**BASE_WIRE, **d}))
def test_mutated_base_only_raises_handle_error(obj: dict[str, Any]) -> None:
    try:
        decode_claims(json.dumps(obj).encode())
    except HandleError as e:
        assert e.reason == "bad_claims"


@given(st.binary(max_size=300))
def test_arbitrary_bytes_only_raise_handle_error(data: bytes) -> None:
    try:
        decode_claims(data)
    except HandleError as e:
        assert e.reason == "bad_claims"
