"""Work the process repeats for as long as it runs (the housekeeping, the peer key check): one named task a
job, started with the app and stopped with it. A round that fails is logged and the next one runs."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable

import structlog

log = structlog.get_logger(__name__)


@contextlib.asynccontextmanager
async def every(
    interval: float,
    work: Callable[[], Awaitable[object]],
    *,
    name: str,
    failed: str,
    at_once: bool = False,
) -> AsyncIterator[None]:
    """Run `work` every `interval` seconds while the block runs (first at once with `at_once`, else after
    one interval); a failure is logged as `failed` with its traceback. Leaving the block stops the task."""

    async def loop() -> None:
        if not at_once:
            await asyncio.sleep(interval)
        while True:
            try:
                await work()
            except Exception:
                log.exception(failed)
            await asyncio.sleep(interval)

    task = asyncio.create_task(loop(), name=name)
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
