"""The driver (calls/driver.py) on a scripted session: parking, timeouts, the gather window, abandoning."""

from __future__ import annotations

import asyncio

import pytest

from proxy.calls.outcomes import NeedsInput
from tests.calls.engine_fakes import Engine, engine, until_set


async def parked(eng: Engine, asks: int = 1) -> NeedsInput:
    """A call started on `eng` whose upstream asked `asks` elicitations: parked."""
    task = asyncio.ensure_future(eng.service.start(eng.request()))
    session = await eng.upstream.next_call()
    for n in range(asks):
        session.ask(n + 1)
    outcome = await task
    assert isinstance(outcome, NeedsInput), outcome
    return outcome


@pytest.mark.parametrize("at_send", [0, 1, 2], ids=["cancel-reply-1", "cancel-reply-2", "notify-cancelled"])
async def test_a_hang_up_during_the_abandons_sends_still_releases_the_session(at_send: int) -> None:
    """Issue 42: the abandon removed the call, then awaited its sends upstream before releasing the
    session; a cancellation there skipped the release, and the session stayed busy for good."""
    eng = engine()
    outcome = await parked(eng, asks=2)
    call = eng.registry.get(outcome.call)
    assert call is not None
    session = eng.upstream.last
    session.hold("send", after=at_send)
    cancel = asyncio.ensure_future(eng.service.cancel(call, "the client cancelled"))
    await until_set(session.waiting["send"])
    cancel.cancel()
    with pytest.raises(asyncio.CancelledError):
        await cancel
    assert eng.leaked == (0, 0)
    assert session.ended == 1


async def test_a_hang_up_during_a_timed_out_calls_abandon_still_releases_the_session() -> None:
    """The round timed out and its abandon is telling the upstream (notifications/cancelled) when the
    client goes away: the shielded retry of the abandon found no call, so nothing released it."""
    eng = engine(call_timeout=0.0)
    start = asyncio.ensure_future(eng.service.start(eng.request()))
    session = await eng.upstream.next_call()
    session.hold("send")
    await until_set(session.waiting["send"])
    start.cancel()
    with pytest.raises(asyncio.CancelledError):
        await start
    assert eng.leaked == (0, 0)
    assert session.closed or session.ended == 1
