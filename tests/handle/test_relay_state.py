"""The sealed relay state (handle/relay_state.py): a modern upstream's requestState bound to its principal."""

from __future__ import annotations

import pytest

from proxy.handle import HandleCodec, HandleError, KeyRing
from proxy.handle.relay_state import (
    MAX_INNER_CHARS,
    RelayState,
    StateTooLarge,
    check_relay_state,
    open_relay_state,
    relay_target,
    seal_relay_state,
)
from proxy.handle.session_ids import LegacySession, seal_session

CODEC = HandleCodec(KeyRing.ephemeral())
STATE = RelayState("up", "alice", relay_target("tools/call", "guard"), "v1.server-state", expires_at=2000)


def test_round_trip_and_binding() -> None:
    token = seal_relay_state(CODEC, STATE)
    opened = open_relay_state(CODEC, token, now=1000)
    assert opened == STATE
    check_relay_state(opened, upstream="up", principal="alice", target=relay_target("tools/call", "guard"))
    for kwargs, reason in (
        ({"upstream": "other", "principal": "alice", "target": STATE.target}, "wrong_upstream"),
        ({"upstream": "up", "principal": "mallory", "target": STATE.target}, "wrong_principal"),
        ({"upstream": "up", "principal": "alice", "target": relay_target("tools/call", "x")}, "wrong_target"),
    ):
        with pytest.raises(HandleError, match=reason):
            check_relay_state(opened, **kwargs)


def test_expired_forged_and_other_handles_are_refused() -> None:
    token = seal_relay_state(CODEC, STATE)
    with pytest.raises(HandleError, match="expired"):
        open_relay_state(CODEC, token, now=2000)
    with pytest.raises(HandleError):
        open_relay_state(CODEC, token[:-4] + "AAAA", now=1000)
    with pytest.raises(HandleError):
        open_relay_state(HandleCodec(KeyRing.ephemeral()), token, now=1000)  # another deployment's key
    session_id = seal_session(CODEC, LegacySession("up", "sid", "alice"))
    with pytest.raises(HandleError, match="unknown_version"):
        open_relay_state(CODEC, session_id, now=1000)  # a sealed session id is no relay state


def test_a_state_too_large_to_seal_is_refused_and_the_largest_fits() -> None:
    largest = RelayState("up", "a" * 22, "t" * 22, "s" * MAX_INNER_CHARS, expires_at=2000)
    assert open_relay_state(CODEC, seal_relay_state(CODEC, largest), now=1000) == largest
    with pytest.raises(StateTooLarge):
        seal_relay_state(CODEC, RelayState("up", "a", "t", "s" * (MAX_INNER_CHARS + 1), expires_at=2000))
