"""Task ids (proxy/tasks/ids.py): sealed claims, format version 3, never interchangeable with other tokens."""

from __future__ import annotations

import json

import pytest

from proxy.handle import Claims, HandleCodec, HandleError, Key, KeyRing
from proxy.handle.session_ids import LegacySession, open_session, seal_session
from proxy.tasks.ids import TASK_ID_VERSION, TaskClaims, open_task_id, seal_task_id

NOW = 1_700_000_000
RING = KeyRing([Key.from_secret(b"\x03" * 32)])
CODEC = HandleCodec(RING, clock=lambda: NOW)
CLAIMS = TaskClaims("default", "k3y", "10.0.0.7:8080", "principal-digest", NOW, NOW + 3600)


def test_round_trip() -> None:
    token = seal_task_id(CODEC, CLAIMS)
    assert open_task_id(CODEC, token, now=NOW + 10) == CLAIMS
    assert seal_task_id(CODEC, CLAIMS) != token  # a fresh nonce each time
    assert "k3y" not in token and "principal" not in token  # sealed, not merely encoded


def test_expired_at_its_ttl() -> None:
    token = seal_task_id(CODEC, CLAIMS)
    with pytest.raises(HandleError) as info:
        open_task_id(CODEC, token, now=NOW + 3600)
    assert info.value.reason == "expired"


@pytest.mark.parametrize("mangle", [lambda t: t[:-4] + "AAAA", lambda t: t[:20], lambda t: "x" + t])
def test_tampered_or_truncated_ids_are_refused(mangle: object) -> None:
    token = seal_task_id(CODEC, CLAIMS)
    with pytest.raises(HandleError):
        open_task_id(CODEC, mangle(token), now=NOW)  # type: ignore[operator]


@pytest.mark.parametrize("token", [None, 7, "", "not base64!"])
def test_junk_is_refused(token: object) -> None:
    with pytest.raises(HandleError):
        open_task_id(CODEC, token, now=NOW)


def test_another_key_ring_cannot_open_it() -> None:
    other = HandleCodec(KeyRing([Key.from_secret(b"\x04" * 32)]), clock=lambda: NOW)
    with pytest.raises(HandleError) as info:
        open_task_id(other, seal_task_id(CODEC, CLAIMS), now=NOW)
    assert info.value.reason == "unknown_key"


def test_a_task_id_is_neither_a_request_state_nor_a_session_id() -> None:
    token = seal_task_id(CODEC, CLAIMS)
    with pytest.raises(HandleError) as as_state:
        CODEC.open(token)
    assert as_state.value.reason == "unknown_version"
    with pytest.raises(HandleError) as as_session:
        open_session(CODEC, token)
    assert as_session.value.reason == "unknown_version"


def test_a_request_state_or_session_id_is_not_a_task_id() -> None:
    state = CODEC.seal(Claims("default", "s", "c", 1, {"elicit-1": 0}, "o", "p", "t", NOW, NOW + 60))
    session = seal_session(CODEC, LegacySession("default", "s", "p"))
    for token in (state, session):
        with pytest.raises(HandleError) as info:
            open_task_id(CODEC, token, now=NOW)
        assert info.value.reason == "unknown_version"


@pytest.mark.parametrize(
    "claims",
    [
        {"u": "a", "t": "b", "o": "c", "w": "d", "iat": NOW},  # a key missing
        {"u": "a", "t": "b", "o": "c", "w": "d", "iat": NOW, "exp": NOW + 1, "x": 1},  # an extra key
        {"u": "", "t": "b", "o": "c", "w": "d", "iat": NOW, "exp": NOW + 1},  # empty upstream
        {"u": "a", "t": "b", "o": "c", "w": "d", "iat": NOW, "exp": "later"},
        {"u": "a", "t": "b", "o": "c", "w": "d", "iat": NOW, "exp": NOW - 1},  # expires before issued
        ["u", "t"],
    ],
)
def test_sealed_but_malformed_claims_are_refused(claims: object) -> None:
    token = RING.seal(json.dumps(claims).encode(), version=TASK_ID_VERSION)
    with pytest.raises(HandleError) as info:
        open_task_id(CODEC, token, now=NOW)
    assert info.value.reason == "bad_claims"


def test_claims_check_themselves() -> None:
    with pytest.raises(ValueError):
        TaskClaims("default", "", "o", "p", NOW, NOW + 1)
    with pytest.raises(ValueError):
        TaskClaims("default", "k", "o", "p", NOW, NOW - 1)
