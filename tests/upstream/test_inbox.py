"""The call inbox (proxy/upstream/inbox.py): asyncio.Queue's behaviour for what the proxy uses, in order,
nothing lost when a woken reader is cancelled, and no future held while nobody waits."""

from __future__ import annotations

import asyncio

import pytest

from proxy.upstream.inbox import LeanQueue

pytestmark = pytest.mark.asyncio


async def test_items_come_out_in_order_and_an_empty_inbox_says_so() -> None:
    inbox: LeanQueue[int] = LeanQueue()
    assert inbox.empty() and inbox.qsize() == 0
    with pytest.raises(asyncio.QueueEmpty):
        inbox.get_nowait()
    for i in range(3):
        inbox.put_nowait(i)
    assert inbox.qsize() == 3
    assert [inbox.get_nowait(), await inbox.get(), await inbox.get()] == [0, 1, 2]


async def test_waiting_readers_are_served_in_turn() -> None:
    inbox: LeanQueue[str] = LeanQueue()
    readers = [asyncio.ensure_future(inbox.get()) for _ in range(2)]
    await asyncio.sleep(0)
    inbox.put_nowait("a")
    inbox.put_nowait("b")
    assert await asyncio.wait_for(asyncio.gather(*readers), 1) == ["a", "b"]
    assert inbox._waiters is None  # nothing held once nobody waits


async def test_a_reader_cancelled_after_being_woken_leaves_the_item_to_the_next() -> None:
    inbox: LeanQueue[str] = LeanQueue()
    first, second = (asyncio.ensure_future(inbox.get()) for _ in range(2))
    await asyncio.sleep(0)
    inbox.put_nowait("kept")  # wakes `first`...
    first.cancel()  # ...which is cancelled before it runs
    assert await asyncio.wait_for(second, 1) == "kept"
    assert first.cancelled() and inbox.empty()


async def test_holds_says_whether_a_waiting_item_is_wanted_and_takes_nothing() -> None:
    inbox: LeanQueue[int] = LeanQueue()
    assert not inbox.holds(lambda i: True)
    for i in (1, 3, 4):
        inbox.put_nowait(i)
    assert inbox.holds(lambda i: i % 2 == 0)
    assert not inbox.holds(lambda i: i > 4)
    assert [inbox.get_nowait() for _ in range(3)] == [1, 3, 4]


async def test_get_by_gives_what_arrives_before_its_deadline_and_times_out_without() -> None:
    inbox: LeanQueue[str] = LeanQueue()
    loop = asyncio.get_running_loop()
    reader = asyncio.ensure_future(inbox.get_by(loop.time() + 60))
    await asyncio.sleep(0)
    inbox.put_nowait("in time")
    assert await asyncio.wait_for(reader, 1) == "in time"
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(inbox.get_by(loop.time()), 1)  # a deadline already past: nothing came
    assert inbox._waiters is None  # nothing held once nobody waits
    inbox.put_nowait("waiting")
    assert await inbox.get_by(loop.time()) == "waiting"  # an item already there is taken, deadline or not


async def test_a_get_by_that_expired_after_being_woken_leaves_the_item_to_the_next() -> None:
    inbox: LeanQueue[str] = LeanQueue()
    loop = asyncio.get_running_loop()
    first = asyncio.ensure_future(inbox.get_by(loop.time() + 60))
    second = asyncio.ensure_future(inbox.get())
    await asyncio.sleep(0)
    inbox.put_nowait("kept")  # wakes `first`...
    first.cancel()  # ...which is cancelled before it runs (as a timeout's expiry would end it)
    assert await asyncio.wait_for(second, 1) == "kept"
    assert first.cancelled() and inbox.empty()
