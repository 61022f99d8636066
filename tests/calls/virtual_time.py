"""A fake clock for the call engine: an event loop whose time is virtual.

The engine takes all its time from the running loop (`loop.time()`, the inbox's `loop.call_at` timers, the
abandon's `asyncio.timeout`, drain's sleeps), never from the wall clock, so the loop is the clock to inject:
this one jumps straight to its next timer whenever nothing is ready to run, instead of sleeping. A test of a
30-second call timeout or a 60-second park runs in microseconds, and its times are exact. Production runs
the ordinary loop: nothing in the engine knows.

A test whose every task waits on something no timer will ever wake would wait forever on a real loop; here
it fails at once with `Stuck`.
"""

from __future__ import annotations

import asyncio
import functools
import selectors
from collections.abc import Callable, Coroutine
from typing import Any, ParamSpec

P = ParamSpec("P")


class Stuck(RuntimeError):
    """Nothing is ready and no timer is set: on a real loop, the test would hang."""


class _Selector(selectors.SelectSelector):
    def __init__(self, loop: VirtualLoop) -> None:
        super().__init__()
        self._loop = loop

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        if timeout is None:
            raise Stuck("every task waits, and no timer will wake any")
        self._loop.now += timeout  # nothing to run until the next timer: go there
        return super().select(0)  # the loop's own wake-ups (call_soon_threadsafe), if any


class VirtualLoop(asyncio.SelectorEventLoop):
    def __init__(self) -> None:
        self.now = 1000.0
        super().__init__(_Selector(self))

    def time(self) -> float:
        return self.now


def virtual_time(test: Callable[P, Coroutine[Any, Any, None]]) -> Callable[P, None]:
    """Run an async test on its own VirtualLoop (a plain test to pytest)."""

    @functools.wraps(test)
    def run(*args: P.args, **kwargs: P.kwargs) -> None:
        with asyncio.Runner(loop_factory=VirtualLoop) as runner:
            runner.run(test(*args, **kwargs))

    return run


def now() -> float:
    """The running loop's time."""
    return asyncio.get_running_loop().time()
