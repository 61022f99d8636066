"""HandleCodec: sealing claims, time checks, binding checks, digests, rotation, size."""

from __future__ import annotations

import base64
import dataclasses
import hashlib
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from proxy.handle import (
    ANONYMOUS,
    Claims,
    HandleCodec,
    HandleError,
    Key,
    KeyRing,
    principal_digest,
    target_digest,
)

NOW = 1_700_000_000
KEY_OLD = Key.from_secret(b"\x01" * 32)
KEY_NEW = Key.from_secret(b"\x02" * 32)

PRINCIPAL = principal_digest("Bearer eyJhbGciOiJSUzI1NiJ9.payload.sig")
TARGET = target_digest("tools/call", {"name": "deploy", "arguments": {"env": "prod", "n": 3}})


class Clock:
    def __init__(self, now: float = NOW) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def make_claims(**changes: Any) -> Claims:
    base = Claims(
        upstream="github",
        session="6f1c2a9e-3b7d-4c1e-9a55-0d2f8e7b4c31",
        call="c_8Jq2mZ0xT4vN1rK7",
        round=1,
        pending={"confirm_deploy": 17, "pick_branch": "srv-req-4f2a9c", "api_token": 18},
        owner="10.42.3.17:8080",
        principal=PRINCIPAL,
        target=TARGET,
        issued_at=NOW,
        expires_at=NOW + 300,
        last_event="1700000000123-42",
    )
    return dataclasses.replace(base, **changes)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def codec(clock: Clock) -> HandleCodec:
    return HandleCodec(KeyRing([KEY_OLD]), clock=clock)


def reason(codec: HandleCodec, token: object) -> str:
    with pytest.raises(HandleError) as info:
        codec.open(token)  # type: ignore[arg-type]
    return info.value.reason


def test_round_trip(codec: HandleCodec) -> None:
    claims = make_claims()
    assert codec.open(codec.seal(claims)) == claims
    assert codec.open(codec.seal(make_claims(last_event=None, pending={}))).last_event is None


def test_handle_size(codec: HandleCodec) -> None:
    token = codec.seal(make_claims())
    print(f"\nhandle with 3 pending keys: {len(token)} chars")
    assert len(token) <= 512


def test_expiry(codec: HandleCodec, clock: Clock) -> None:
    token = codec.seal(make_claims())
    for now in (NOW - 60, NOW, NOW + 299, NOW + 299.999):
        clock.now = now
        assert codec.open(token).call == "c_8Jq2mZ0xT4vN1rK7"
    for now in (NOW + 300, NOW + 300.001, NOW + 10**9):
        clock.now = now
        assert reason(codec, token) == "expired"


def test_issued_in_future(codec: HandleCodec, clock: Clock) -> None:
    token = codec.seal(make_claims(issued_at=NOW + 60, expires_at=NOW + 360))
    assert codec.open(token).issued_at == NOW + 60  # within skew
    clock.now = NOW - 0.5
    assert reason(codec, token) == "not_yet_valid"
    clock.now = NOW
    assert reason(codec, codec.seal(make_claims(issued_at=NOW + 61, expires_at=NOW + 361))) == "not_yet_valid"


def test_verify(codec: HandleCodec) -> None:
    claims = codec.open(codec.seal(make_claims()))
    codec.verify(claims, upstream="github", principal=PRINCIPAL, target=TARGET)
    cases = [
        ({"upstream": "gitlab"}, "wrong_upstream"),
        ({"upstream": "githu"}, "wrong_upstream"),
        ({"upstream": "gïthub"}, "wrong_upstream"),
        ({"principal": principal_digest("Bearer other")}, "wrong_principal"),
        ({"principal": ANONYMOUS}, "wrong_principal"),
        (
            {"target": target_digest("tools/call", {"name": "deploy", "arguments": {"env": "dev", "n": 3}})},
            "wrong_target",
        ),
        ({"target": "\ud800"}, "wrong_target"),
    ]
    for override, why in cases:
        kwargs = {"upstream": "github", "principal": PRINCIPAL, "target": TARGET, **override}
        with pytest.raises(HandleError) as info:
            codec.verify(claims, **kwargs)
        assert info.value.reason == why, override


def test_rotation(clock: Clock) -> None:
    codec = HandleCodec(KeyRing([KEY_OLD]), clock=clock)
    old_token = codec.seal(make_claims())
    codec.replace_ring(KeyRing([KEY_NEW, KEY_OLD]))
    assert codec.ring.kids == (KEY_NEW.kid, KEY_OLD.kid)
    assert codec.open(old_token) == make_claims()
    new_token = codec.seal(make_claims(round=2))
    assert codec.open(new_token).round == 2
    codec.replace_ring(KeyRing([KEY_NEW]))
    assert reason(codec, old_token) == "unknown_key"
    assert codec.open(new_token).round == 2


def test_wrong_version_and_junk_plaintext(codec: HandleCodec) -> None:
    ring = codec.ring
    assert reason(codec, ring.seal(b"{}", version=2)) == "unknown_version"
    assert reason(codec, ring.seal(b"junk", version=1)) == "bad_claims"
    assert reason(codec, "") == "too_short"
    assert reason(codec, None) == "malformed"


@given(st.text(max_size=300))
def test_open_arbitrary_text_only_raises_handle_error(s: str) -> None:
    codec = HandleCodec(KeyRing([KEY_OLD]), clock=Clock())
    with pytest.raises(HandleError):
        codec.open(s)


def test_errors_carry_no_claims(codec: HandleCodec, clock: Clock) -> None:
    token = codec.seal(make_claims())
    clock.now = NOW + 10_000
    with pytest.raises(HandleError) as info:
        codec.open(token)
    assert str(info.value) == "expired" and "github" not in repr(info.value)


# --- digests -----------------------------------------------------------------------------------


def test_principal_digest() -> None:
    assert principal_digest(None) == principal_digest("") == ANONYMOUS == "anonymous"
    value = "Bearer abc"
    expected = base64.urlsafe_b64encode(hashlib.sha256(b"mrtr-proxy principal\0" + value.encode()).digest())
    assert principal_digest(value) == expected[:22].decode()
    assert len(principal_digest(value)) == 22
    assert principal_digest("Bearer abd") != principal_digest(value)
    assert principal_digest("Bearer ключ") != principal_digest("Bearer \ud800")  # never raises


def test_target_digest_is_spelled_as_every_replica_spells_it() -> None:
    """The digest sealed into a handle by one replica is checked by whichever replica gets the retry: its
    canonical JSON never changes (these values were taken before the encoder was made once per process)."""
    args = {"z": [1, 2.5, 1e16, None, True], "é": "ü\u2028\n", "a": {"b": -3}}
    assert target_digest("tools/call", {"name": "deploy", "arguments": args}) == "BlC1ErkS6HzsflI0Pm4OOX"
    assert target_digest("resources/read", {"uri": "file:///x"}) == "JkvG87yMhJOtE3F5lWM6G_"
    assert target_digest("prompts/get", {"name": "p"}) == "EQoe0qPHXQpdgxtfSFGKe3"


def test_target_digest_canonical() -> None:
    a = target_digest("tools/call", {"name": "t", "arguments": {"x": 1, "y": [1, {"b": 2, "a": "é"}]}})
    b = target_digest(
        "tools/call",
        {
            "arguments": {"y": [1, {"a": "é", "b": 2}], "x": 1},
            "name": "t",
            "_meta": {"progressToken": 5},
            "requestState": "zzz",
            "inputResponses": {"k": {}},
        },
    )
    assert a == b and len(a) == 22
    empty = target_digest("tools/call", {"name": "t"})
    assert empty == target_digest("tools/call", {"name": "t", "arguments": None})
    assert empty == target_digest("tools/call", {"name": "t", "arguments": {}})


def test_target_digest_distinguishes() -> None:
    digests = {
        target_digest("tools/call", {"name": "t", "arguments": {"x": 1}}),
        target_digest("tools/call", {"name": "t", "arguments": {"x": "1"}}),
        target_digest("tools/call", {"name": "t", "arguments": {"x": 1.0}}),
        target_digest("tools/call", {"name": "t", "arguments": {"x": True}}),
        target_digest("tools/call", {"name": "u", "arguments": {"x": 1}}),
        target_digest("prompts/get", {"name": "t", "arguments": {"x": 1}}),
        target_digest("resources/read", {"uri": "t"}),
        target_digest("tools/call", {"name": "t"}),
    }
    assert len(digests) == 8


def test_resources_read_ignores_arguments() -> None:
    uri = "file:///etc/motd"
    assert target_digest("resources/read", {"uri": uri}) == target_digest(
        "resources/read", {"uri": uri, "arguments": {"x": 1}, "name": "n"}
    )


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("tools/list", {}),
        ("sampling/createMessage", {"name": "x"}),
        ("tools/call", {}),
        ("tools/call", {"name": 5}),
        ("prompts/get", {"uri": "x"}),
        ("resources/read", {"name": "x"}),
    ],
)
def test_target_digest_rejects(method: str, params: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        target_digest(method, params)
