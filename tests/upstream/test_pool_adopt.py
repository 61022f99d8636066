"""SessionPool.adopt (takeover of another replica's session): it takes a slot of the pool like an opening
session, from before its awaits, within pool.max_sessions and the principal's share."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from proxy.translate.capabilities import ClientCapabilities
from proxy.upstream.base import ServerInfo, UpstreamError
from proxy.upstream.pool import PoolExhausted, PoolKey, SessionPool
from upstream.test_pool import INFO, Factory, FakeSession

ALICE = PoolKey(ClientCapabilities(elicitation_form=True), principal="alice")
BOB = PoolKey(ClientCapabilities(elicitation_form=True), principal="bob")


class Adopter:
    """Adopts after `gate` opens (all adopters wait there together), or fails with `fail`."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.entered = asyncio.Event()  # an adopt is waiting at the gate
        self.fail: BaseException | None = None
        self.adopted: list[FakeSession] = []

    async def __call__(self, key: PoolKey, session_id: str, info: ServerInfo) -> Any:
        self.entered.set()
        await self.gate.wait()
        if self.fail is not None:
            raise self.fail
        session = FakeSession(100 + len(self.adopted), key)
        self.adopted.append(session)
        return session


def pool_of(adopter: Adopter, *, max_sessions: int = 1, max_per_principal: int = 0) -> SessionPool:
    return SessionPool(
        "up",
        Factory(),
        max_sessions=max_sessions,
        idle_ttl=60.0,
        adopter=adopter,
        max_per_principal=max_per_principal,
    )


async def waiting(adopter: Adopter) -> None:
    async with asyncio.timeout(5):
        await adopter.entered.wait()


async def known(pool: SessionPool) -> None:
    """The pool learnt the server's info (an adopt needs it): one session opened and closed again."""
    assert (await pool.server_info(ALICE)) == INFO


async def test_concurrent_takeovers_stay_within_max_sessions() -> None:
    """Issue 42: adopt reserved nothing while it awaited the adopter, so two takeovers at once both found
    room in a pool of one session and it held two."""
    adopter = Adopter()
    pool = pool_of(adopter, max_sessions=1)
    await known(pool)
    first = asyncio.ensure_future(pool.adopt(ALICE, "sid-1"))
    await waiting(adopter)
    second = asyncio.ensure_future(pool.adopt(BOB, "sid-2"))
    adopter.gate.set()
    results = await asyncio.gather(first, second, return_exceptions=True)
    assert isinstance(results[0], FakeSession)
    assert isinstance(results[1], PoolExhausted)
    assert pool.size == pool.in_use == 1


async def test_a_takeover_counts_against_the_principals_share() -> None:
    """Issue 42: adopt skipped pool.max_sessions_per_principal altogether."""
    adopter = Adopter()
    adopter.gate.set()
    pool = pool_of(adopter, max_sessions=4, max_per_principal=1)
    await known(pool)
    await pool.adopt(ALICE, "sid-1")
    with pytest.raises(PoolExhausted, match="max_sessions_per_principal"):
        await pool.adopt(ALICE, "sid-2")
    assert pool.held_by("alice") == 1
    await pool.adopt(BOB, "sid-3")  # another principal's share is its own


async def test_concurrent_takeovers_of_one_principal_stay_within_its_share() -> None:
    adopter = Adopter()
    pool = pool_of(adopter, max_sessions=4, max_per_principal=1)
    await known(pool)
    first = asyncio.ensure_future(pool.adopt(ALICE, "sid-1"))
    await waiting(adopter)
    second = asyncio.ensure_future(pool.adopt(ALICE, "sid-2"))
    adopter.gate.set()
    results = await asyncio.gather(first, second, return_exceptions=True)
    assert [type(r) for r in results] == [FakeSession, PoolExhausted]
    assert pool.held_by("alice") == 1


@pytest.mark.parametrize(
    "failure", [UpstreamError("gone"), asyncio.CancelledError()], ids=["fails", "hang-up"]
)
async def test_a_failed_or_cancelled_takeover_gives_its_slot_back(failure: BaseException) -> None:
    adopter = Adopter()
    pool = pool_of(adopter, max_sessions=1, max_per_principal=1)
    await known(pool)
    adopting = asyncio.ensure_future(pool.adopt(ALICE, "sid-1"))
    await waiting(adopter)
    if isinstance(failure, asyncio.CancelledError):
        adopting.cancel()
    else:
        adopter.fail = failure
        adopter.gate.set()
    with pytest.raises(type(failure)):
        await adopting
    assert (pool.size, pool.in_use, pool.held_by("alice")) == (0, 0, 0)
    adopter.fail = None
    adopter.gate.set()
    assert isinstance(await pool.adopt(ALICE, "sid-2"), FakeSession)  # the slot is free again
