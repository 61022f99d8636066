"""The driver (calls/driver.py) on a scripted session and a virtual clock: completing, parking, round two,
timeouts, the gather window, yielding, what the upstream sends besides input requests, abandoning."""

from __future__ import annotations

import asyncio

import pytest

from calls.engine_fakes import ACCEPT, Engine, engine, until_set
from calls.virtual_time import now, virtual_time
from proxy.calls.outcomes import Completed, Failed, NeedsInput, Running
from proxy.handle.claims import MAX_PENDING
from proxy.upstream.base import TransportLost
from proxy.wire import jsonrpc

DONE = {"content": [{"type": "text", "text": "done"}]}


async def parked(eng: Engine, asks: int = 1, tool: str = "t") -> NeedsInput:
    """A call started on `eng` whose upstream asked `asks` elicitations: parked."""
    task = asyncio.ensure_future(eng.service.start(eng.request(tool=tool)))
    session = await eng.upstream.next_call()
    for n in range(asks):
        session.ask(n + 1)
    outcome = await task
    assert isinstance(outcome, NeedsInput), outcome
    return outcome


@virtual_time
async def test_a_call_the_upstream_answers_completes_and_its_session_goes_back_idle() -> None:
    eng = engine()
    start = asyncio.ensure_future(eng.service.start(eng.request()))
    session = await eng.upstream.next_call()
    assert session.calls[0][0] == "tools/call"
    session.answer(DONE)
    outcome = await start
    assert isinstance(outcome, Completed) and outcome.response.result == DONE  # type: ignore[union-attr]
    assert eng.leaked == (0, 0) and eng.pool.size == 1  # idle, for the next call of its key
    assert session.ended == 1 and not session.closed


@virtual_time
async def test_an_input_request_parks_the_call_with_a_handle() -> None:
    eng = engine()
    outcome = await parked(eng)
    assert outcome.round == 1 and list(outcome.input_requests) == ["elicit-1"]
    assert outcome.input_requests["elicit-1"]["method"] == "elicitation/create"
    assert eng.registry.parked_count == 1 and eng.pool.in_use == 1
    claims = eng.codec.open(outcome.request_state)
    assert (claims.call, claims.round, dict(claims.pending)) == (outcome.call, 1, {"elicit-1": 1})


@virtual_time
async def test_round_two_then_completion() -> None:
    eng = engine()
    first = await parked(eng)
    session = eng.upstream.last
    resume = asyncio.ensure_future(
        eng.service.resume(eng.request(), first.request_state, {"elicit-1": ACCEPT})
    )
    await until_set(session.done["send"])
    session.ask(2)
    second = await resume
    assert (
        isinstance(second, NeedsInput) and second.round == 2 and list(second.input_requests) == ["elicit-2"]
    )
    assert second.call == first.call
    last = asyncio.ensure_future(
        eng.service.resume(eng.request(), second.request_state, {"elicit-2": ACCEPT})
    )
    session.done["send"].clear()
    await until_set(session.done["send"])
    session.answer(DONE)
    assert isinstance(await last, Completed)
    assert [m.id for m in session.sent if isinstance(m, jsonrpc.Result)] == [
        1,
        2,
    ]  # each answer went upstream to its own request
    assert eng.leaked == (0, 0)
    assert eng.registry.proven("alice")  # it completed a call it was asked input for: full TTLs from now


@virtual_time
async def test_a_round_the_upstream_never_answers_times_out_after_call_timeout() -> None:
    eng = engine(call_timeout=30.0)
    began = now()
    start = asyncio.ensure_future(eng.service.start(eng.request()))
    session = await eng.upstream.next_call()
    outcome = await start
    assert isinstance(outcome, Failed) and outcome.error.code == jsonrpc.UPSTREAM_TIMEOUT
    assert now() - began == pytest.approx(30.0)
    assert "30s" in outcome.error.message
    (cancelled,) = session.sent
    assert isinstance(cancelled, jsonrpc.Notification) and cancelled.method == "notifications/cancelled"
    assert cancelled.params["requestId"] == 100
    assert eng.leaked == (0, 0) and session.closed


@virtual_time
async def test_the_gather_window_collects_requests_sent_together_into_one_round() -> None:
    eng = engine(gather_window=0.05)
    began = now()
    start = asyncio.ensure_future(eng.service.start(eng.request()))
    session = await eng.upstream.next_call()
    session.ask(1)
    asyncio.get_running_loop().call_later(0.01, session.ask, 2, "sampling/createMessage", SAMPLE)
    outcome = await start
    assert isinstance(outcome, NeedsInput)
    assert list(outcome.input_requests) == ["elicit-1", "sample-2"]
    assert now() - began == pytest.approx(0.05)  # the whole window, on first sight of the tool
    arrival = eng.service.gathering.arrival(("up", "t"))
    assert arrival is not None and arrival.bursts == 1 and arrival.max_gap == pytest.approx(0.01)


@virtual_time
async def test_a_request_after_the_window_is_the_next_round() -> None:
    eng = engine(gather_window=0.05)
    start = asyncio.ensure_future(eng.service.start(eng.request()))
    session = await eng.upstream.next_call()
    session.ask(1)
    outcome = await start
    assert isinstance(outcome, NeedsInput) and list(outcome.input_requests) == ["elicit-1"]
    session.ask(2)  # while parked, before the answer went upstream: the burst came apart
    resume = asyncio.ensure_future(
        eng.service.resume(eng.request(), outcome.request_state, {"elicit-1": ACCEPT})
    )
    second = await resume
    assert isinstance(second, NeedsInput) and list(second.input_requests) == ["elicit-2"]
    arrival = eng.service.gathering.arrival(("up", "t"))
    assert arrival is not None and arrival.bursts == 1  # learned as a tool that sends bursts


@virtual_time
async def test_a_tool_seen_sending_lone_requests_parks_at_once() -> None:
    eng = engine(gather_window=0.05)
    await parked(eng, tool="lone")  # first sight: the whole window
    began = now()
    await parked(eng, tool="lone")
    assert now() == began  # no quiet period any more
    await parked(eng, tool="other")
    assert now() - began == pytest.approx(0.05)  # learned per tool


@virtual_time
async def test_a_call_still_running_at_yield_after_is_left_running_then_driven_on() -> None:
    eng = engine()
    began = now()
    start = asyncio.ensure_future(eng.service.start(eng.request(), yield_after=2.0))
    session = await eng.upstream.next_call()
    outcome = await start
    assert isinstance(outcome, Running) and now() - began == pytest.approx(2.0)
    assert eng.leaked == (1, 1)  # still live: its task drives it on
    drive = asyncio.ensure_future(eng.service.drive(outcome.call))
    session.answer(DONE)
    assert isinstance(await drive, Completed)
    assert eng.leaked == (0, 0)


@virtual_time
async def test_a_ping_is_answered_at_once_and_notifications_reach_the_sink() -> None:
    eng = engine()
    heard: list[jsonrpc.Notification] = []

    async def sink(note: jsonrpc.Notification) -> None:
        heard.append(note)

    start = asyncio.ensure_future(eng.service.start(eng.request(log_level="info"), sink))
    session = await eng.upstream.next_call()
    session.push(jsonrpc.Request(9, "ping", {}))
    session.push(jsonrpc.Notification("notifications/message", {"level": "error", "data": "x"}))
    session.push(jsonrpc.Notification("notifications/message", {"level": "debug", "data": "y"}))
    session.answer(DONE)
    assert isinstance(await start, Completed)
    assert session.sent == [jsonrpc.Result(9, {})]
    assert [n.method for n in heard] == ["notifications/message"]


@virtual_time
async def test_more_input_requests_than_a_round_carries_end_the_call() -> None:
    eng = engine()
    start = asyncio.ensure_future(eng.service.start(eng.request()))
    session = await eng.upstream.next_call()
    for n in range(MAX_PENDING + 1):
        session.ask(n + 1)
    outcome = await start
    assert isinstance(outcome, Failed) and outcome.error.code == jsonrpc.LIMIT_EXCEEDED
    assert eng.leaked == (0, 0)
    assert sum(isinstance(m, jsonrpc.Result) for m in session.sent) == MAX_PENDING + 1  # each one cancelled


@pytest.mark.parametrize("delivered", [True, False], ids=["may-have-run", "never-got-it"])
@virtual_time
async def test_a_lost_transport_fails_the_call_and_drops_the_session(delivered: bool) -> None:
    eng = engine()
    start = asyncio.ensure_future(eng.service.start(eng.request()))
    session = await eng.upstream.next_call()
    session.inbox.put_nowait(TransportLost("the stream broke", delivered=delivered))  # type: ignore[union-attr]
    if delivered:  # it may have run: never sent again
        outcome = await start
        assert isinstance(outcome, Failed) and outcome.error.code == jsonrpc.UPSTREAM_FAILED
    else:  # the upstream never got it: sent once more, on a fresh session
        again = await eng.upstream.next_call()
        assert again is not session
        again.answer(DONE)
        assert isinstance(await start, Completed)
    assert session.closed and eng.leaked == (0, 0)


@virtual_time
async def test_a_full_parked_share_ends_the_call_instead_of_parking_it() -> None:
    eng = engine(max_sessions=2, parked_share=0.5)
    await parked(eng)
    start = asyncio.ensure_future(eng.service.start(eng.request()))
    session = await eng.upstream.next_call()
    session.ask(1)
    outcome = await start
    assert isinstance(outcome, Failed) and outcome.error.code == jsonrpc.LIMIT_EXCEEDED
    assert "parked_share" in outcome.error.message
    assert eng.leaked == (1, 1)  # the first one, still parked


@pytest.mark.parametrize("at_send", [0, 1, 2], ids=["cancel-reply-1", "cancel-reply-2", "notify-cancelled"])
@virtual_time
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


@virtual_time
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


@virtual_time
async def test_an_upstream_that_never_takes_the_abandons_sends_is_given_five_seconds() -> None:
    eng = engine()
    outcome = await parked(eng)
    call = eng.registry.get(outcome.call)
    assert call is not None
    session = eng.upstream.last
    session.hold("send")
    began = now()
    await eng.service.cancel(call, "the client cancelled")
    assert now() - began == pytest.approx(5.0)
    assert eng.leaked == (0, 0)


SAMPLE = {"messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}], "maxTokens": 5}
