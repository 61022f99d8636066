"""What a parked call's session keeps small: Router.call_delivered, how the end of the task that delivers a
receiving call's request reaches its inbox (the task itself is the delivery, with no coroutine around it),
and one initialize result object shared by the sessions whose results are equal."""

from __future__ import annotations

import asyncio
import copy
import functools
from collections.abc import Mapping
from typing import Any

from proxy.upstream.base import Inbox, NotDelivered, TransportLost, UpstreamError
from proxy.upstream.router import Exchange, Router, negotiate
from proxy.wire import jsonrpc


async def _ended_with(outcome: BaseException | None) -> TransportLost | None:
    inbox: Inbox = Inbox()

    async def deliver() -> None:
        if isinstance(outcome, asyncio.CancelledError):
            await asyncio.sleep(60)  # the scenario: an upstream that never answers
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
    lost = TransportLost("reading the upstream's reply failed: RuntimeError")
    assert await _ended_with(RuntimeError("oops")) == lost


async def test_equal_initialize_results_are_one_object_shared_by_the_sessions() -> None:
    """Every session of a pool (a parked call's too) holds the upstream's initialize result: one object for
    equal results, not a copy each; a different result is its own."""

    def answering(info: dict[str, Any]) -> Exchange:
        async def exchange(method: str, params: Mapping[str, Any], timeout: float) -> jsonrpc.Response:
            return jsonrpc.Result(1, {"protocolVersion": "2025-11-25", **copy.deepcopy(info)})

        return exchange

    same = {"capabilities": {"tools": {}}, "serverInfo": {"name": "s", "version": "1"}}
    first = await negotiate(answering(same), ("2025-11-25",), {}, 5)
    second = await negotiate(answering(same), ("2025-11-25",), {}, 5)
    other = await negotiate(answering({**same, "instructions": "x"}), ("2025-11-25",), {}, 5)
    assert first is second and first.server_info == {"name": "s", "version": "1"}
    assert other is not first and other.instructions == "x"


async def test_a_call_the_transport_spares_hears_nothing_while_plain_waiters_fail() -> None:
    """`fail_all(spare_call=True)`: the receiving call's own request is still out (streamable_posts.py
    `_die`), so it hears nothing from the session's end; plain waiters fail either way."""
    for spare in (True, False):
        router, inbox = Router(lambda _: None), Inbox()
        router.begin_call(7, inbox)
        waiter = router.expect(8)
        router.fail_all("gone", spare_call=spare)
        assert isinstance(waiter.exception(), UpstreamError)
        seen = [inbox.get_nowait() for _ in range(inbox.qsize())]
        assert seen == ([] if spare else [TransportLost("gone")])
        router.forget(8)
