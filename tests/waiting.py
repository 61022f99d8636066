"""The suite's one way to wait for something to happen: poll observable state until it holds, bounded.

``await eventually(check, "what is awaited")`` calls ``check`` (a function, sync or async) until it returns
a truthy value, and returns that value; after ``limit_s`` it fails with an ``AssertionError`` that names
what was awaited and the last value seen (or the last exception ``check`` raised). ``eventually_sync`` is
the same for code without an event loop. Tests wait on the event itself (a registry, a metric, an admin
endpoint, a log line), never on a ``sleep`` standing in for it.

Like ``import peers``, test modules import this as ``from waiting import eventually`` (tests/ is on sys.path).
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")

# Long enough for a cluster of real proxies on a busy 2-core machine (only a failing wait lasts that long);
# a test that wants a tighter bound says so.
DEFAULT_LIMIT_S = 30.0
DEFAULT_EVERY_S = 0.05


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 400 else text[:400] + "…"


def _timed_out(what: str, limit_s: float, last: object, error: BaseException | None) -> AssertionError:
    seen = f"last raised {error!r}" if error is not None else f"last value seen: {_shown(last)}"
    return AssertionError(f"timed out after {limit_s:g} s waiting for {what} ({seen})")


async def eventually(
    check: Callable[[], T | Awaitable[T]],
    what: str,
    limit_s: float = DEFAULT_LIMIT_S,
    every_s: float = DEFAULT_EVERY_S,
    *,
    retry_on: tuple[type[BaseException], ...] = (),
    seen: Callable[[], object] | None = None,
) -> T:
    """Poll ``check`` until it returns a truthy value (returned); fail after ``limit_s`` saying what and why.

    An exception from ``check`` propagates at once unless its type is in ``retry_on`` (for example a
    connection refused while a server comes up), in which case it counts as "not yet". ``seen``, if given,
    says what there was instead (the log lines, say) in the failure, in place of ``check``'s last value.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit_s
    last: object = None
    error: BaseException | None = None
    while True:
        try:
            value = check()
            if inspect.isawaitable(value):
                value = await value
            error = None
        except retry_on as exc:
            value, error = None, exc  # type: ignore[assignment]
        if value:
            return value  # type: ignore[return-value]
        last = value
        if loop.time() >= deadline:
            raise _timed_out(what, limit_s, seen() if seen is not None else last, error)
        await asyncio.sleep(every_s)


def eventually_sync(
    check: Callable[[], T],
    what: str,
    limit_s: float = DEFAULT_LIMIT_S,
    every_s: float = DEFAULT_EVERY_S,
    *,
    retry_on: tuple[type[BaseException], ...] = (),
    seen: Callable[[], object] | None = None,
) -> T:
    """``eventually`` for code that has no event loop (a thread, a subprocess's output file)."""
    deadline = time.monotonic() + limit_s
    last: object = None
    error: BaseException | None = None
    while True:
        try:
            value = check()
            error = None
        except retry_on as exc:
            value, error = None, exc  # type: ignore[assignment]
        if value:
            return value
        last = value
        if time.monotonic() >= deadline:
            raise _timed_out(what, limit_s, seen() if seen is not None else last, error)
        time.sleep(every_s)
