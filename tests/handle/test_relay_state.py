"""The sealed relay state (handle/relay_state.py): a modern upstream's requestState bound to its principal."""

from __future__ import annotations

import base64
import json
import random
import zlib

import pytest

from proxy.handle import MAX_TOKEN_CHARS, HandleCodec, HandleError, KeyRing
from proxy.handle.keyring import MAX_LARGE_TOKEN_CHARS
from proxy.handle.records import seal_record
from proxy.handle.relay_state import (
    MAX_STATE_CHARS,
    RELAY_STATE_VERSION,
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


def sealed_like(size: int) -> str:
    """A state as the mcp SDK seals its own: base64url of ciphertext, nothing to compress."""
    return base64.urlsafe_b64encode(random.Random(size).randbytes(size)).decode()[:size]


def test_states_of_real_size_fit_and_the_largest_is_bounded() -> None:
    """Not held to the key ring's MAX_TOKEN_CHARS: a 20 KB state (random: deflating gains nothing) and
    the largest, MAX_STATE_CHARS, seal and open; one character more is refused."""
    for size in (20_000, MAX_STATE_CHARS):
        state = RelayState("up", "a" * 43, "t" * 43, sealed_like(size), expires_at=2000)
        token = seal_relay_state(CODEC, state)
        assert MAX_TOKEN_CHARS < len(token) <= MAX_LARGE_TOKEN_CHARS
        assert open_relay_state(CODEC, token, now=1000) == state
    with pytest.raises(StateTooLarge, match=f"at most {MAX_STATE_CHARS}"):
        seal_relay_state(CODEC, RelayState("up", "a", "t", "s" * (MAX_STATE_CHARS + 1), expires_at=2000))


def test_a_json_state_is_deflated_and_one_that_escapes_past_the_handle_cap_is_refused() -> None:
    text = json.dumps([{"step": n, "answer": "yes", "field": "name"} for n in range(1000)])
    state = RelayState("up", "alice", "t", text, expires_at=2000)
    token = seal_relay_state(CODEC, state)
    assert len(token) < len(text) // 4  # deflated before sealing
    assert open_relay_state(CODEC, token, now=1000) == state
    rng = random.Random(7)
    escaped = "".join(chr(rng.randrange(0x100, 0xD7FF)) for _ in range(MAX_STATE_CHARS))  # \uXXXX each
    with pytest.raises(StateTooLarge, match=f"over {MAX_LARGE_TOKEN_CHARS}"):
        seal_relay_state(CODEC, RelayState("up", "a", "t", escaped, expires_at=2000))


def test_plain_handles_still_open_and_bad_or_oversized_payloads_are_refused() -> None:
    """A handle sealed before deflating (plain JSON claims) still opens; deflated claims that are corrupt
    or inflate past their bound, even under our own key, are `bad_claims`; a token over the cap is
    refused before any work."""
    plain = seal_record(CODEC.ring, RELAY_STATE_VERSION, {"u": "up", "w": "a", "t": "t", "s": "v1.x"}, 2000)
    assert open_relay_state(CODEC, plain, now=1000).state == "v1.x"
    bomb = b"z" + zlib.compress(b" " * (9 * MAX_STATE_CHARS))
    for body in (b"z" + b"not deflate", bomb):
        token = CODEC.ring.seal(body, version=RELAY_STATE_VERSION, max_chars=MAX_LARGE_TOKEN_CHARS)
        with pytest.raises(HandleError, match="bad_claims"):
            open_relay_state(CODEC, token, now=1000)
    with pytest.raises(HandleError, match="too_long"):
        open_relay_state(CODEC, "A" * (MAX_LARGE_TOKEN_CHARS + 1), now=1000)
