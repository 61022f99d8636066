"""The call service (calls/service.py) on a scripted session: starting, resuming, a client that hangs up
during any await of either."""

from __future__ import annotations

import asyncio

import pytest

from proxy.calls.outcomes import NeedsInput
from tests.calls.engine_fakes import ACCEPT, engine, until_set


@pytest.mark.parametrize("at", ["call", "drive"])
async def test_a_hang_up_during_any_await_of_a_start_leaks_nothing(at: str) -> None:
    """A hang-up while the call itself was being sent upstream left it registered (running, so never
    reaped) and its session busy: that await was outside the start's clean-up."""
    eng = engine()
    if at == "call":
        eng.upstream.holding = ("call",)
    start = asyncio.ensure_future(eng.service.start(eng.request()))
    session = await eng.upstream.next_call()
    await until_set(session.waiting["call"] if at == "call" else session.done["call"])
    start.cancel()
    if at == "call":
        session.release_gate("call")
    with pytest.raises(asyncio.CancelledError):
        await start
    assert eng.leaked == (0, 0)
    assert session.closed or not session.alive or session.ended == 1


@pytest.mark.parametrize("at", ["send", "drive"])
async def test_a_hang_up_during_any_await_of_a_resume_leaks_nothing(at: str) -> None:
    eng = engine()
    start = asyncio.ensure_future(eng.service.start(eng.request()))
    session = await eng.upstream.next_call()
    session.ask(1)
    parked = await start
    assert isinstance(parked, NeedsInput)
    if at == "send":
        session.hold("send")
    resume = asyncio.ensure_future(
        eng.service.resume(eng.request(), parked.request_state, {"elicit-1": ACCEPT})
    )
    await until_set(session.waiting["send"] if at == "send" else session.done["send"])
    resume.cancel()
    if at == "send":
        session.release_gate("send")
    with pytest.raises(asyncio.CancelledError):
        await resume
    assert eng.leaked == (0, 0)
