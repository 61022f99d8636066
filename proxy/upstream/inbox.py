"""A call's inbox: what the upstream sends for one call, in arrival order, for whoever drives the call.

The subset of `asyncio.Queue` the proxy uses (`put_nowait`, `get`, `get_nowait`, `empty`, `qsize`), and
`holds` (is such an item waiting?), without its cost: a Queue holds three deques of ~760 bytes each from the
start, and every parked call keeps its inbox for as long as it waits (often minutes). This one holds a list
and creates a future only while someone waits. Unbounded, like the Queue it replaces: the upstream's
messages for a call are never dropped.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class LeanQueue(Generic[T]):
    """An unbounded FIFO for asyncio tasks; waiters are served in the order they began waiting."""

    __slots__ = ("_items", "_waiters")

    def __init__(self) -> None:
        self._items: list[T] = []
        self._waiters: list[asyncio.Future[None]] | None = None

    def qsize(self) -> int:
        return len(self._items)

    def empty(self) -> bool:
        return not self._items

    def put_nowait(self, item: T) -> None:
        self._items.append(item)
        self._wake_next()

    def holds(self, wanted: Callable[[T], bool]) -> bool:
        """Is an item `wanted` says yes to waiting? (It stays where it is.)"""
        return any(map(wanted, self._items))

    def get_nowait(self) -> T:
        if not self._items:
            raise asyncio.QueueEmpty
        return self._items.pop(0)

    async def get(self) -> T:
        return await self.get_by(None)

    async def get_by(self, deadline: float | None) -> T:
        """`get`, or TimeoutError at `deadline` (loop time; None: none) with nothing received. A timer on the
        waiter itself: no `asyncio.timeout` context (its object, its timer, the task's cancellation and
        uncancel) around each wait of a call that is driven."""
        loop = asyncio.get_running_loop()
        while not self._items:
            waiter: asyncio.Future[None] = loop.create_future()
            timer = None if deadline is None else loop.call_at(deadline, _expire, waiter)
            if self._waiters is None:
                self._waiters = []
            self._waiters.append(waiter)
            try:
                await waiter
            except BaseException:
                if waiter.done() and not waiter.cancelled() and self._items:
                    self._wake_next(waiter)  # woken, then cancelled or expired: the item goes to the next one
                raise
            finally:
                if timer is not None:
                    timer.cancel()
                self._waiters.remove(waiter)
                if not self._waiters:
                    self._waiters = None
        return self._items.pop(0)

    def _wake_next(self, skip: asyncio.Future[None] | None = None) -> None:
        """Wake the longest-waiting reader not yet woken (other than `skip`)."""
        for waiter in self._waiters or ():
            if waiter is not skip and not waiter.done():
                waiter.set_result(None)
                return


def _expire(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_exception(TimeoutError())


__all__ = ["LeanQueue"]
