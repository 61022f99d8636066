"""The sealed relay task id (handle/relay_task.py): a modern upstream's task id bound to its principal."""

from __future__ import annotations

import pytest

from proxy.handle import HandleCodec, HandleError, KeyRing, formats, token_version
from proxy.handle.relay_state import RelayState, seal_relay_state
from proxy.handle.relay_task import (
    MAX_TASK_ID_CHARS,
    RelayTask,
    TaskIdTooLarge,
    check_relay_task,
    open_relay_task,
    seal_relay_task,
)

CODEC = HandleCodec(KeyRing.ephemeral())
TASK = RelayTask("up", "alice", "786512e2-9e0d-44bd-8f29-789f320fe840", expires_at=2000)


def test_round_trip_and_binding() -> None:
    token = seal_relay_task(CODEC, TASK)
    assert token_version(token) == formats.RELAY_TASK and TASK.task not in token
    opened = open_relay_task(CODEC, token, now=1000)
    assert opened == TASK
    check_relay_task(opened, upstream="up", principal="alice")
    with pytest.raises(HandleError, match="wrong_upstream"):
        check_relay_task(opened, upstream="other", principal="alice")
    with pytest.raises(HandleError, match="wrong_principal"):
        check_relay_task(opened, upstream="up", principal="mallory")


def test_expired_forged_and_other_kinds_are_refused() -> None:
    token = seal_relay_task(CODEC, TASK)
    with pytest.raises(HandleError, match="expired"):
        open_relay_task(CODEC, token, now=2000)
    with pytest.raises(HandleError):
        open_relay_task(CODEC, token[:-4] + "AAAA", now=1000)
    with pytest.raises(HandleError, match="unknown_key"):
        open_relay_task(HandleCodec(KeyRing.ephemeral()), token, now=1000)
    state = seal_relay_state(CODEC, RelayState("up", "alice", "t", TASK.task, expires_at=2000))
    with pytest.raises(HandleError, match="unknown_version"):
        open_relay_task(CODEC, state, now=1000)  # a relayed requestState is no task id
    with pytest.raises(HandleError):
        open_relay_task(CODEC, TASK.task, now=1000)  # the upstream's own id is no handle


def test_a_task_id_too_long_to_seal_is_refused_and_the_longest_fits() -> None:
    longest = RelayTask("up", "a" * 64, "k" * MAX_TASK_ID_CHARS, expires_at=2000)
    assert open_relay_task(CODEC, seal_relay_task(CODEC, longest), now=1000) == longest
    with pytest.raises(TaskIdTooLarge):
        seal_relay_task(CODEC, RelayTask("up", "a", "k" * (MAX_TASK_ID_CHARS + 1), expires_at=2000))


def test_token_version_reads_the_clear_header_only() -> None:
    assert token_version(seal_relay_task(CODEC, TASK)) == formats.RELAY_TASK
    assert token_version("not a token") is None and token_version(7) is None and token_version("AAAA") is None
