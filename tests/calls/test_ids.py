"""proxy/calls/ids.py: call ids drawn from the OS in batches are as `secrets.token_urlsafe(12)`'s were
(16 base64url characters), never repeat across a refill, and a forked child draws its own."""

from __future__ import annotations

import os
import re
import select

import pytest

from proxy.calls import ids
from proxy.calls.ids import BATCH, call_id

ID = re.compile(r"^[A-Za-z0-9_-]{16}$")


def test_the_alphabet_and_length_are_token_urlsafe_12s() -> None:
    drawn = [call_id() for _ in range(BATCH)]
    assert all(ID.match(i) for i in drawn), [i for i in drawn if not ID.match(i)]


def test_ids_are_unique_across_refills_and_one_os_draw_makes_a_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    draws: list[int] = []
    real = os.urandom

    def counted(n: int) -> bytes:
        draws.append(n)
        return real(n)

    monkeypatch.setattr(ids.os, "urandom", counted)
    ids._ids.clear()
    drawn = [call_id() for _ in range(4 * BATCH + 1)]
    assert len(set(drawn)) == len(drawn)
    assert draws == [ids.ID_BYTES * BATCH] * 5  # one getrandom per 256 ids, not one per id


def test_a_forked_child_does_not_hand_out_its_parents_next_ids() -> None:
    call_id()  # the batch is drawn and partly used: a child that kept it would repeat what follows
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next ids, then gone at once
        try:
            os.write(write, " ".join(call_id() for _ in range(8)).encode())
        finally:
            os._exit(0)
    os.close(write)
    try:
        ready, _, _ = select.select([read], [], [], 30)
        assert ready, "the child wrote nothing within 30 s"
        child = os.read(read, 4096).decode().split()
    finally:
        os.close(read)
        os.waitpid(pid, 0)
    parent = [call_id() for _ in range(8)]
    assert len(child) == 8 and all(ID.match(i) for i in child)
    assert not set(child) & set(parent)
