"""deadline (proxy/upstream/deadline.py): asyncio.timeout's behaviour from one timer per loop."""

from __future__ import annotations

import asyncio

import pytest
from waiting import eventually

from proxy.upstream import deadline as board_module
from proxy.upstream.deadline import deadline


@pytest.fixture
def quick(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every deadline on the board (none short), ticking every 10 ms: the tests take a moment, not seconds."""
    monkeypatch.setattr(board_module, "SHORT_S", 0.0)
    monkeypatch.setattr(board_module, "STEP", 0.01)


def _held() -> int:
    board = board_module._board()
    return len(board.due)


async def test_a_block_that_outlives_its_deadline_raises_timeout_error(quick: None) -> None:
    with pytest.raises(TimeoutError):
        async with deadline(0.05):
            await asyncio.sleep(30)  # the scenario: work that outlasts any deadline
    assert _held() == 0


async def test_a_block_that_ends_in_time_leaves_nothing_held_and_the_timer_stops(quick: None) -> None:
    async with deadline(30):
        assert _held() == 1
        await asyncio.sleep(0.03)  # a negative check: a few ticks pass, nothing expires
    assert _held() == 0
    # No deadline held: no tick either.
    await eventually(lambda: board_module._board()._timer is None, "the board's timer to stop")


async def test_a_cancellation_from_elsewhere_stays_a_cancellation(quick: None) -> None:
    started = asyncio.Event()

    async def held() -> None:
        async with deadline(30):
            started.set()
            await asyncio.sleep(30)  # the scenario: work that outlasts any deadline

    task = asyncio.ensure_future(held())
    await asyncio.wait_for(started.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 5)
    assert _held() == 0


async def test_an_error_inside_the_block_passes_through_as_it_is(quick: None) -> None:
    with pytest.raises(ValueError, match="inner"):
        async with deadline(30):
            raise ValueError("inner")
    assert _held() == 0


async def test_deadlines_expire_each_at_its_own_time(quick: None) -> None:
    async def bounded(delay: float) -> str:
        try:
            async with deadline(delay):
                await asyncio.sleep(0.2)  # the scenario: work that takes 0.2 s under a deadline
        except TimeoutError:
            return "timed out"
        return "done"

    assert await asyncio.wait_for(asyncio.gather(bounded(0.02), bounded(30)), 10) == ["timed out", "done"]


async def test_a_short_deadline_and_none_behave_as_asyncio_timeout() -> None:
    with pytest.raises(TimeoutError):
        async with deadline(0.01):  # shorter than SHORT_S: asyncio.timeout's own timer
            await asyncio.sleep(30)  # the scenario: work that outlasts any deadline
    async with deadline(None):  # no deadline at all
        await asyncio.sleep(0)
    assert _held() == 0


async def test_far_deadlines_held_beside_near_ones_neither_fire_early_nor_late(quick: None) -> None:
    async def bounded(delay: float) -> str:
        try:
            async with deadline(delay):
                await asyncio.sleep(0.3)  # the scenario: work that takes 0.3 s under a deadline
        except TimeoutError:
            return "timed out"
        return "done"

    far = [bounded(30) for _ in range(5)]
    results = await asyncio.wait_for(asyncio.gather(*far, bounded(0.05), bounded(0.1)), 10)
    assert results == ["done"] * 5 + ["timed out", "timed out"]
    assert _held() == 0
