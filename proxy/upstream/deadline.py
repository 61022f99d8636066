"""A request's deadline upstream from one timer per event loop, not a timer each.

`asyncio.timeout` arms a timer for every use: under uvloop a libuv timer handle made, started, stopped and
closed, ~31k instructions of a relayed call's ~1,010k (bench/hotpath_ir.py --relay, an ablation). Most
requests end long before their deadline, so `deadline` puts each one in its loop's board instead (a dict
entry, removed on the way out); while any is there, one timer ticks every `STEP` seconds and cancels the tasks
whose deadline has passed, which then raise TimeoutError exactly as under `asyncio.timeout` (the same
cancel/uncancel bookkeeping: a cancellation from elsewhere stays a cancellation). A deadline fires up to one
`STEP` late; one shorter than `SHORT_S` takes `asyncio.timeout` (a tick's lateness would be much of it).
"""

from __future__ import annotations

import asyncio
import math
import weakref
from types import TracebackType
from typing import Final

STEP: Final = 0.25  # seconds between ticks while a deadline is held
SHORT_S: Final = 2.0  # a shorter deadline is asyncio.timeout's


class deadline:  # lower case: used as `async with deadline(s):`, like asyncio.timeout
    """`async with deadline(delay):` bounds the block by `delay` seconds (None: not at all), raising
    TimeoutError when it passes, as `asyncio.timeout(delay)` does."""

    __slots__ = ("_board", "_cancelling", "_delay", "_expired", "_short", "_task")

    def __init__(self, delay: float | None) -> None:
        self._delay = delay
        self._board: _Board | None = None
        self._short: asyncio.Timeout | None = None
        self._expired = False

    async def __aenter__(self) -> None:
        delay = self._delay
        if delay is None:
            return
        if delay < SHORT_S:
            self._short = asyncio.timeout(delay)
            await self._short.__aenter__()
            return
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("deadline() is used inside a task")
        self._task = task
        self._cancelling = task.cancelling()
        board = self._board = _board()
        board.enter(self, board.loop.time() + delay)

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._short is not None:
            await self._short.__aexit__(exc_type, exc, tb)
            return
        board = self._board
        if board is None:
            return
        board.due.pop(self, None)
        if self._expired and self._task.uncancel() <= self._cancelling and exc_type is asyncio.CancelledError:
            raise TimeoutError from exc  # our cancellation, and no other since: the deadline passed

    def expire(self) -> None:
        """The deadline passed (the board's tick): cancel the task, whose way out says TimeoutError."""
        self._expired = True
        self._task.cancel()


class _Board:
    """The deadlines held on one loop (`due`: when each passes, by the loop's clock) and the one timer that
    runs while any is held. A tick looks through them only once the nearest may have passed (`nearest`: a
    bound never later than the nearest held; one that left early only makes a tick look in vain), so many
    long calls in flight cost a tick next to nothing."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.due: dict[deadline, float] = {}
        self.nearest = math.inf
        self._timer: asyncio.TimerHandle | None = None

    def enter(self, held: deadline, when: float) -> None:
        self.due[held] = when
        self.nearest = min(self.nearest, when)
        if self._timer is None:
            self._timer = self.loop.call_later(STEP, self._tick)

    def _tick(self) -> None:
        now = self.loop.time()
        if now >= self.nearest:
            nearest = math.inf
            for held, when in list(self.due.items()):
                if when <= now:
                    del self.due[held]
                    held.expire()
                elif when < nearest:
                    nearest = when
            self.nearest = nearest
        self._timer = self.loop.call_later(STEP, self._tick) if self.due else None


_BOARDS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Board] = weakref.WeakKeyDictionary()
_LAST: list[_Board | None] = [None]  # the board every request of a proxy finds: no weak dict look-up


def _board() -> _Board:
    loop = asyncio.get_running_loop()
    board = _LAST[0]
    if board is not None and board.loop is loop:
        return board
    board = _BOARDS.get(loop)
    if board is None:
        board = _BOARDS[loop] = _Board(loop)
    _LAST[0] = board
    return board


__all__ = ["SHORT_S", "STEP", "deadline"]
