"""The call service (calls/service.py) on a scripted session: starting, resuming, a client that hangs up
during any await of either."""

from __future__ import annotations

import asyncio

import pytest

from calls.engine_fakes import (
    ACCEPT,
    KEY,
    UPSTREAM,
    Engine,
    ScriptedSession,
    engine,
    foreign_handle,
    until_set,
)
from calls.virtual_time import virtual_time
from proxy.calls.outcomes import CallRequest, Completed, Failed, Forward, InvalidRequestState, NeedsInput
from proxy.wire import jsonrpc


@pytest.mark.parametrize("at", ["call", "drive"])
@virtual_time
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
@virtual_time
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


async def _parked(eng: Engine) -> tuple[NeedsInput, ScriptedSession]:
    start = asyncio.ensure_future(eng.service.start(eng.request()))
    session = await eng.upstream.next_call()
    session.ask(1)
    outcome = await start
    assert isinstance(outcome, NeedsInput)
    return outcome, session


@virtual_time
async def test_a_retry_with_a_bad_answer_is_refused_and_the_call_stays_parked() -> None:
    eng = engine()
    parked, session = await _parked(eng)
    outcome = await eng.service.resume(eng.request(), parked.request_state, {"elicit-1": {"action": "maybe"}})
    assert isinstance(outcome, Failed) and outcome.error.code == jsonrpc.INVALID_PARAMS
    assert "elicit-1" in outcome.error.message
    assert eng.registry.parked_count == 1 and session.sent == []


@virtual_time
async def test_a_handle_of_another_call_target_or_principal_is_refused() -> None:
    eng = engine()
    parked, _ = await _parked(eng)
    other = CallRequest(
        upstream=UPSTREAM, method="tools/call", params={"name": "other"}, key=KEY, principal="alice"
    )
    with pytest.raises(InvalidRequestState):
        await eng.service.resume(other, parked.request_state, {"elicit-1": ACCEPT})
    with pytest.raises(InvalidRequestState):
        await eng.service.resume(eng.request(principal="mallory"), parked.request_state, {})
    with pytest.raises(InvalidRequestState):
        await eng.service.resume(eng.request(), parked.request_state[:-4] + "AAAA", {})
    assert eng.registry.parked_count == 1


@virtual_time
async def test_a_second_retry_while_one_drives_the_round_is_refused() -> None:
    eng = engine()
    parked, session = await _parked(eng)
    first = asyncio.ensure_future(
        eng.service.resume(eng.request(), parked.request_state, {"elicit-1": ACCEPT})
    )
    await until_set(session.done["send"])
    with pytest.raises(InvalidRequestState, match=r"stale_round|round_in_progress"):
        await eng.service.resume(eng.request(), parked.request_state, {"elicit-1": ACCEPT})
    session.answer({"content": []})
    assert isinstance(await first, Completed)
    with pytest.raises(InvalidRequestState, match="call_ended"):  # a replay of a handle of an ended call
        await eng.service.resume(eng.request(), parked.request_state, {"elicit-1": ACCEPT})


@virtual_time
async def test_a_stale_handle_of_an_earlier_round_is_refused() -> None:
    eng = engine()
    parked, session = await _parked(eng)
    resume = asyncio.ensure_future(
        eng.service.resume(eng.request(), parked.request_state, {"elicit-1": ACCEPT})
    )
    await until_set(session.done["send"])
    session.ask(2)
    assert isinstance(await resume, NeedsInput)
    with pytest.raises(InvalidRequestState, match="stale_round"):
        await eng.service.resume(eng.request(), parked.request_state, {"elicit-1": ACCEPT})


@virtual_time
async def test_a_handle_another_replica_holds_is_forwarded_there() -> None:
    eng = engine()
    handle = foreign_handle(eng, owner="http://peer")
    outcome = await eng.service.resume(eng.request(), handle, {"elicit-1": ACCEPT})
    assert isinstance(outcome, Forward) and outcome.owner == "http://peer"
    with pytest.raises(InvalidRequestState, match="not_owner"):
        await eng.service.resume(eng.request(), handle, {"elicit-1": ACCEPT}, local_only=True)
    assert eng.upstream.adopted == []


@virtual_time
async def test_a_handle_this_replica_issued_for_a_call_it_no_longer_holds_is_refused() -> None:
    eng = engine()
    handle = foreign_handle(
        eng, owner="http://me", issued_at=int(eng.wall())
    )  # issued since this replica started: it would know it
    with pytest.raises(InvalidRequestState, match="call_ended"):
        await eng.service.resume(eng.request(), handle, {"elicit-1": ACCEPT})


@virtual_time
async def test_end_parked_ends_the_call_for_its_own_principal_only() -> None:
    eng = engine()
    parked, session = await _parked(eng)
    assert not await eng.service.end_parked(parked.request_state, principal="mallory", reason="x")
    assert eng.registry.parked_count == 1
    assert await eng.service.end_parked(parked.request_state, principal="alice", reason="cancelled")
    assert eng.leaked == (0, 0)
    assert session.sent[0] == jsonrpc.Result(1, {"action": "cancel"})
