"""SessionRoots (calls/roots.py): what a session does with roots/list requests that arrive with no call in
flight, and when the server must be told that the roots changed."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from proxy.calls.roots import REFETCH_WAIT, STALE_AFTER, SessionRoots
from proxy.translate.exchange import PROXY_ASKED
from proxy.wire import jsonrpc

pytestmark = pytest.mark.asyncio

A = {"roots": [{"uri": "file:///a"}]}
B = {"roots": [{"uri": "file:///b"}]}


def refuse(req: jsonrpc.Request) -> jsonrpc.Response:
    return jsonrpc.error(req.id, -32602, "no call in flight")


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def roots_list(rid: int) -> jsonrpc.Request:
    return jsonrpc.Request(rid, "roots/list", {})


async def test_held_until_a_call_asks_then_answered_from_what_the_client_said() -> None:
    roots = SessionRoots(refuse, hold=True)
    assert roots.answer(roots_list(0)) is None  # held: no answer yet
    assert roots.asks_unprompted
    assert [r.id for r in roots.take_held()] == [0]
    assert roots.take_held() == []
    assert roots.answered(0, A) is False  # answered in time: nothing to tell
    again = roots.answer(roots_list(1))  # a later re-fetch with no call in flight
    assert isinstance(again, jsonrpc.Result) and again.result == A


async def test_not_held_without_roots_or_for_other_requests() -> None:
    roots = SessionRoots(refuse, hold=False)
    assert isinstance(roots.answer(roots_list(0)), jsonrpc.Error)
    assert not roots.asks_unprompted
    held = SessionRoots(refuse, hold=True)
    assert isinstance(held.answer(jsonrpc.Request(3, "sampling/createMessage", {})), jsonrpc.Error)


async def test_a_stale_held_request_is_told_again() -> None:
    clock = Clock()
    roots = SessionRoots(refuse, hold=True, clock=clock)
    roots.answer(roots_list(0))
    clock.now += STALE_AFTER + 1
    assert roots.answered(0, A) is True  # the server may have given up on it: list_changed


async def test_the_proxys_own_question_tells_only_a_change() -> None:
    roots = SessionRoots(refuse, hold=True)
    roots.hold(roots_list(0))
    roots.answered(0, A)
    assert roots.answered(PROXY_ASKED, A) is False
    assert roots.answered(PROXY_ASKED, B) is True
    assert roots.given == B["roots"]
    assert roots.answered(PROXY_ASKED, {"roots": "nonsense"}) is False
    assert roots.given == B["roots"]


class Session:
    def __init__(self) -> None:
        self.sent: list[Any] = []

    async def send(self, message: Any) -> None:
        self.sent.append(message)


async def test_tell_changed_waits_for_the_refetch() -> None:
    roots = SessionRoots(refuse, hold=True)
    roots.answered(PROXY_ASKED, B)
    session = Session()
    telling = asyncio.ensure_future(roots.tell_changed(session))  # type: ignore[arg-type]
    for _ in range(5):
        await asyncio.sleep(0)
    assert [m.method for m in session.sent] == ["notifications/roots/list_changed"]
    assert not telling.done()  # waiting for the server to ask again
    refetched = roots.answer(roots_list(9))  # it does, with no call in flight: answered with B
    assert isinstance(refetched, jsonrpc.Result) and refetched.result == B
    async with asyncio.timeout(REFETCH_WAIT * 5):  # a bound only: it returns on the re-fetch
        await telling


async def test_roots_asked_within_the_sessions_first_call_count_as_unprompted() -> None:
    """A start-up request can arrive once the first call has begun (it then rides that call's round): the
    session keeps roots as state all the same, so later calls are asked for theirs."""
    roots = SessionRoots(refuse, hold=True)
    roots.begin_call()
    assert roots.answered(4, A) is False  # the server's own request, answered within the first call
    assert roots.asks_unprompted
    later = SessionRoots(refuse, hold=True)
    later.begin_call()
    later.begin_call()
    later.answered(5, A)  # a tool asking in a later call: nothing learnt about the session
    assert not later.asks_unprompted
