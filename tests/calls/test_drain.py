"""Ending calls for the process (calls/drain.py) on a scripted session and a virtual clock: reaping parked
calls nobody came back for, an operator's cancel, shutting down (drain, close)."""

from __future__ import annotations

import asyncio

import pytest

from calls.engine_fakes import ACCEPT, Engine, ScriptedSession, engine
from calls.virtual_time import now, virtual_time
from proxy.calls.drain import NotCancellable
from proxy.calls.outcomes import Completed, Failed, InvalidRequestState, NeedsInput
from proxy.wire import jsonrpc


async def parked(eng: Engine) -> tuple[NeedsInput, ScriptedSession]:
    start = asyncio.ensure_future(eng.service.start(eng.request()))
    session = await eng.upstream.next_call()
    session.ask(1)
    outcome = await start
    assert isinstance(outcome, NeedsInput)
    return outcome, session


@virtual_time
async def test_a_parked_call_nobody_came_back_for_is_reaped_after_its_ttl() -> None:
    eng = engine(parked_ttl=60.0)
    outcome, session = await parked(eng)
    await asyncio.sleep(59.0)
    assert await eng.service.reap_expired() == 0
    await asyncio.sleep(1.0)
    assert await eng.service.reap_expired() == 1
    assert eng.leaked == (0, 0)
    assert session.sent[0] == jsonrpc.Result(1, {"action": "cancel"})  # its elicitation answered
    assert isinstance(session.sent[1], jsonrpc.Notification)  # and the call cancelled upstream
    with pytest.raises(InvalidRequestState, match="call_ended"):  # its retry, too late
        await eng.service.resume(eng.request(), outcome.request_state, {"elicit-1": ACCEPT})


@virtual_time
async def test_an_operator_cancels_a_parked_call_and_its_retry_is_told() -> None:
    eng = engine()
    outcome, _ = await parked(eng)
    with pytest.raises(NotCancellable) as unknown:
        await eng.service.cancel_parked("no-such-call")
    assert unknown.value.status == 404
    call = await eng.service.cancel_parked(outcome.call)
    assert call.id == outcome.call and eng.leaked == (0, 0)
    retry = await eng.service.resume(eng.request(), outcome.request_state, {"elicit-1": ACCEPT})
    assert isinstance(retry, Failed) and retry.error.code == jsonrpc.CANCELLED_BY_OPERATOR


@virtual_time
async def test_an_operator_cannot_cancel_a_running_call() -> None:
    eng = engine()
    start = asyncio.ensure_future(eng.service.start(eng.request()))
    session = await eng.upstream.next_call()
    (call,) = eng.registry
    with pytest.raises(NotCancellable) as running:
        await eng.service.cancel_parked(call.id)
    assert running.value.status == 409
    session.answer()
    await start


@virtual_time
async def test_drain_waits_its_grace_for_running_calls_to_finish() -> None:
    eng = engine()
    start = asyncio.ensure_future(eng.service.start(eng.request()))
    session = await eng.upstream.next_call()
    asyncio.get_running_loop().call_later(3.0, session.answer)
    began = now()
    await eng.service.drain(10.0)
    assert now() - began == pytest.approx(3.0, abs=0.11)  # done as soon as the call is (polled at 0.1 s)
    assert isinstance(await start, Completed)
    assert eng.leaked == (0, 0)


@virtual_time
async def test_drain_cuts_a_call_still_running_after_its_grace() -> None:
    eng = engine()
    start = asyncio.ensure_future(eng.service.start(eng.request()))
    session = await eng.upstream.next_call()
    began = now()
    await eng.service.drain(10.0)
    assert now() - began == pytest.approx(10.0, abs=0.11)
    outcome = await start
    assert isinstance(outcome, Failed) and outcome.error.code == jsonrpc.REPLICA_SHUT_DOWN
    assert eng.leaked == (0, 0)
    assert any(isinstance(m, jsonrpc.Notification) for m in session.sent)  # cancelled upstream


@virtual_time
async def test_drain_leaves_a_resumable_parked_call_for_a_takeover_and_cancels_the_rest() -> None:
    eng = engine()
    resumable, kept = await parked(eng)
    _, cancelled = await parked(eng)
    cancelled.last_event_id = None  # its stream cannot be resumed elsewhere
    await eng.service.drain(0.0)
    assert eng.leaked == (0, 0)
    assert kept.detached and kept.sent == []  # left as it is upstream, for another replica
    assert cancelled.sent[0] == jsonrpc.Result(1, {"action": "cancel"})
    # After the drain a retry that comes back here anyway is taken over (stopping: not "call_ended").
    retry = asyncio.ensure_future(
        eng.service.resume(eng.request(), resumable.request_state, {"elicit-1": ACCEPT}, local_only=True)
    )
    adopted = await eng.upstream.next_call()
    assert adopted.session_id == kept.session_id
    adopted.answer()
    assert isinstance(await retry, Completed)


@virtual_time
async def test_close_cancels_every_call() -> None:
    eng = engine()
    await parked(eng)
    await parked(eng)
    await eng.service.close()
    assert eng.leaked == (0, 0)
