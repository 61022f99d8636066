"""Replier.kept_alive leaves nothing behind for the cycle collector: a request's replier (and the request it
holds) is freed by reference counting as soon as its handler is done."""

from __future__ import annotations

import asyncio
import gc
import weakref

from aiohttp.test_utils import make_mocked_request

from proxy.front.reply import Replier


async def test_a_kept_alive_replier_is_freed_without_the_collector() -> None:
    replier = Replier(make_mocked_request("POST", "/mcp", headers={"Accept": "application/json"}))
    freed = weakref.ref(replier)
    gc.disable()
    try:
        assert await replier.kept_alive(asyncio.sleep(0, "answer"), 60.0) == "answer"
        del replier
        assert freed() is None  # before: the re-arming closure referred to itself, and held the replier
    finally:
        gc.enable()


async def test_keep_alive_ticks_are_written_then_stop_with_the_work() -> None:
    replier = Replier(make_mocked_request("POST", "/mcp", headers={"Accept": "application/json"}))
    ticks = 0

    async def keepalive() -> None:
        nonlocal ticks
        ticks += 1

    replier.keepalive = keepalive  # type: ignore[method-assign]
    assert await replier.kept_alive(asyncio.sleep(0.05, "answer"), 0.01) == "answer"
    seen = ticks
    await asyncio.sleep(0.03)
    assert seen >= 1 and ticks == seen
