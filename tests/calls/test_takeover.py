"""Taking over a call whose replica is gone (calls/takeover.py), on a scripted session: the client may
hang up during any await of it, and nothing may leak (no busy session, no registered call)."""

from __future__ import annotations

import asyncio
from typing import Any, Literal

import pytest

from calls.engine_fakes import ACCEPT, engine, foreign_handle, until_set
from calls.virtual_time import virtual_time
from proxy.calls.outcomes import Completed, Failed, NeedsInput
from proxy.wire import jsonrpc

ANSWER = {"elicit-1": ACCEPT}
HASHED = {"pending": {"elicit-1": "digest"}, "hashed": ("elicit-1",)}  # an id too long to carry


@virtual_time
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
@virtual_time
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


@virtual_time
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


@pytest.mark.parametrize(
    ("changes", "owner_gone", "code"),
    [
        ({"last_event": None}, "unreachable", jsonrpc.CALL_LOST),
        ({"last_event": None}, "unknown", jsonrpc.OUTCOME_UNKNOWN),
        ({"session": ""}, "unreachable", jsonrpc.CALL_LOST),
        (HASHED, "unreachable", jsonrpc.CALL_LOST),
        (HASHED, "unknown", jsonrpc.OUTCOME_UNKNOWN),
    ],
    ids=["no-event-id", "no-event-id-input-taken", "no-session", "hashed-ids", "hashed-ids-input-taken"],
)
@virtual_time
async def test_a_call_the_upstream_cannot_resume_is_reported_lost_never_re_run(
    changes: dict[str, Any], owner_gone: Literal["unreachable", "unknown"], code: int
) -> None:
    eng = engine()
    handle = foreign_handle(eng, **changes)
    outcome = await eng.service.resume(eng.request(), handle, ANSWER, owner_gone=owner_gone)
    assert isinstance(outcome, Failed) and outcome.error.code == code
    assert eng.upstream.adopted == [] and eng.upstream.opened == [] and eng.leaked == (0, 0)


@virtual_time
async def test_a_takeover_whose_stream_cannot_be_resumed_ends_the_adopted_session() -> None:
    eng = engine()
    eng.upstream.failing = ("resume_call",)
    outcome = await eng.service.resume(eng.request(), foreign_handle(eng), ANSWER, owner_gone="unreachable")
    assert isinstance(outcome, Failed) and outcome.error.code == jsonrpc.CALL_LOST
    # dropped, not kept idle: what is left is the session opened to learn the server's info
    assert eng.leaked == (0, 0) and eng.pool.size == len(eng.upstream.opened) == 1
