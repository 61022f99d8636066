"""Router.call_delivered: how the end of the task that delivers a receiving call's request reaches its inbox
(the task itself is the delivery, with no coroutine around it, so a parked call holds one frame less)."""

from __future__ import annotations

import asyncio
import functools

from proxy.upstream.base import Inbox, NotDelivered, TransportLost, UpstreamError
from proxy.upstream.router import Router


async def _ended_with(outcome: BaseException | None) -> TransportLost | None:
    inbox: Inbox = Inbox()

    async def deliver() -> None:
        if isinstance(outcome, asyncio.CancelledError):
            await asyncio.sleep(60)
        if outcome is not None:
            raise outcome

    task = asyncio.ensure_future(deliver())
    task.add_done_callback(functools.partial(Router.call_delivered, inbox))
    await asyncio.sleep(0)
    if isinstance(outcome, asyncio.CancelledError):
        task.cancel()
    async with asyncio.timeout(5):
        await asyncio.gather(task, return_exceptions=True)
        await asyncio.sleep(0)  # the done-callback runs soon after
    lost = inbox.get_nowait() if not inbox.empty() else None
    assert lost is None or isinstance(lost, TransportLost)
    return lost


async def test_a_delivery_that_ends_well_says_nothing() -> None:
    assert await _ended_with(None) is None


async def test_each_way_a_delivery_fails_reaches_the_call() -> None:
    assert await _ended_with(UpstreamError("HTTP 500")) == TransportLost("HTTP 500")
    assert await _ended_with(NotDelivered("refused")) == TransportLost("refused", delivered=False)
    assert await _ended_with(asyncio.CancelledError()) == TransportLost("session closed")
    # A bug in a transport fails the call at once (and is logged) instead of leaving it to its timeout.
    assert await _ended_with(RuntimeError("oops")) == TransportLost("RuntimeError delivering the call")
