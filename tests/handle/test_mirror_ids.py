"""The mirror's sealed ids (handle/mirror_ids.py): legacy session ids of modern upstreams and ask ids."""

from __future__ import annotations

import pytest

from proxy.handle import HandleCodec, HandleError, KeyRing
from proxy.handle.mirror_ids import (
    MirrorAsk,
    MirrorSession,
    open_ask,
    open_mirror_session,
    seal_ask,
    seal_mirror_session,
)
from proxy.handle.relay_state import RelayState, seal_relay_state
from proxy.handle.session_ids import LegacySession, open_session, seal_session

CODEC = HandleCodec(KeyRing.ephemeral())
SESSION = MirrorSession(
    "up", "alice", "tok", "2025-06-18", ("mcp", "1.30"), {"elicitation": {"form": {}}, "roots": {}}, 2000
)
ASK = MirrorAsk("10.0.0.1:8080", "call-1", "name", "tok", expires_at=2000)


def test_session_round_trip() -> None:
    assert open_mirror_session(CODEC, seal_mirror_session(CODEC, SESSION)) == SESSION


def test_session_expiry_is_absolute() -> None:
    """A sealed session id carries its expiry: good before it, `expired` from it on; without `now` it is
    still told apart as a mirror session id (the mirror answers it: 404, initialize again)."""
    token = seal_mirror_session(CODEC, SESSION)
    assert open_mirror_session(CODEC, token, now=1999) == SESSION
    with pytest.raises(HandleError, match="expired"):
        open_mirror_session(CODEC, token, now=2000)
    assert open_mirror_session(CODEC, token).expires_at == 2000


def test_ask_round_trip_and_expiry() -> None:
    token = seal_ask(CODEC, ASK)
    assert open_ask(CODEC, token, now=1000) == ASK
    with pytest.raises(HandleError, match="expired"):
        open_ask(CODEC, token, now=2000)


@pytest.mark.parametrize("made_up", [7, None, "", "not-a-token", "x" * 5000])
def test_an_id_the_proxy_did_not_seal_is_no_ask(made_up: object) -> None:
    with pytest.raises(HandleError):
        open_ask(CODEC, made_up, now=1000)


def test_kinds_never_pass_for_one_another() -> None:
    """Each is its own key-ring format: a relay session id, a relayed state or an ask id is no mirror
    session, and the other way round."""
    mirror = seal_mirror_session(CODEC, SESSION)
    others = (
        seal_session(CODEC, LegacySession("up", "tok", "alice")),
        seal_relay_state(CODEC, RelayState("up", "alice", "t", "s", 2000)),
        seal_ask(CODEC, ASK),
    )
    for token in others:
        with pytest.raises(HandleError, match="unknown_version"):
            open_mirror_session(CODEC, token)
    with pytest.raises(HandleError, match="unknown_version"):
        open_session(CODEC, mirror)
    with pytest.raises(HandleError, match="unknown_version"):
        open_ask(CODEC, mirror, now=1000)


def test_another_deployments_key_is_refused() -> None:
    other = HandleCodec(KeyRing.ephemeral())
    with pytest.raises(HandleError):
        open_mirror_session(CODEC, seal_mirror_session(other, SESSION))
    with pytest.raises(HandleError):
        open_ask(CODEC, seal_ask(other, ASK), now=1000)
