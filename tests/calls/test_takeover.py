"""Taking over a call whose replica is gone (calls/takeover.py), on a scripted session: the client may
hang up during any await of it, and nothing may leak (no busy session, no registered call)."""

from __future__ import annotations

import asyncio

import pytest

from proxy.calls.outcomes import Completed, Failed, NeedsInput
from proxy.wire import jsonrpc
from tests.calls.engine_fakes import ACCEPT, engine, foreign_handle, until_set

ANSWER = {"elicit-1": ACCEPT}


async def test_a_takeover_resumes_the_stream_delivers_the_input_and_drives_on() -> None:
    eng = engine()
    resume = asyncio.ensure_future(
        eng.service.resume(eng.request(), foreign_handle(eng), ANSWER, owner_gone="unreachable")
    )
    session = await eng.upstream.next_call()
    assert session.session_id == "sid-1" and session.resumed == (7, "ev-9")
    session.push(jsonrpc.Result(7, {"content": [{"type": "text", "text": "done"}]}))
    outcome = await resume
    assert isinstance(outcome, Completed) and outcome.response.id == 7
    assert [m.id for m in session.sent if isinstance(m, jsonrpc.Result)] == [5]  # the input went upstream
    assert eng.leaked == (0, 0)


@pytest.mark.parametrize("at", ["adopt", "resume_call", "send", "drive"])
async def test_a_hang_up_during_any_await_of_a_takeover_leaks_nothing(at: str) -> None:
    eng = engine()
    if at == "adopt":
        eng.upstream.adopt_gate = asyncio.Event()
    elif at != "drive":
        eng.upstream.holding = (at,)
    resume = asyncio.ensure_future(
        eng.service.resume(eng.request(), foreign_handle(eng), ANSWER, owner_gone="unreachable")
    )
    if at == "adopt":
        await until_set(eng.upstream.adopting)
    else:
        session = await eng.upstream.next_call()
        if at == "drive":  # the input went upstream: it waits for what the upstream sends next
            await until_set(session.done["send"])
        else:
            await until_set(session.waiting[at])
    resume.cancel()
    if at == "send":
        session.release_gate("send")  # the abandon's own sends (the cancel upstream) go through
    with pytest.raises(asyncio.CancelledError):
        await resume
    assert eng.leaked == (0, 0)


async def test_a_takeover_that_finds_the_replica_full_once_adopted_gives_the_session_back() -> None:
    """The takeover was admitted, then waited for its session while other calls took the last places:
    adding the call failed with LimitExceeded, raised to the front, and the adopted session stayed busy."""
    eng = engine(max_calls=1)
    eng.upstream.adopt_gate = asyncio.Event()
    resume = asyncio.ensure_future(
        eng.service.resume(eng.request(), foreign_handle(eng), ANSWER, owner_gone="unreachable")
    )
    await until_set(eng.upstream.adopting)
    start = asyncio.ensure_future(eng.service.start(eng.request()))
    (await eng.upstream.next_call()).ask(1)
    assert isinstance(await start, NeedsInput)  # holds the only place
    eng.upstream.adopt_gate.set()
    outcome = await resume
    assert isinstance(outcome, Failed) and outcome.error.code == jsonrpc.LIMIT_EXCEEDED
    assert eng.leaked == (1, 1)  # the parked call's own, nothing more
    assert eng.upstream.adopted[0].detached  # not ended upstream: a later retry may take it over
