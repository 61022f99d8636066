"""SessionRoots (calls/roots.py): what a session does with roots/list requests that arrive with no call in
flight, and when the server must be told that the roots changed."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from proxy.calls.roots import REFETCH_WAIT, STALE_AFTER, SessionRoots
from proxy.translate.exchange import PROXY_ASKED
from proxy.upstream.session_roots import FIRST_WINDOW, MAX_WINDOW, MIN_WINDOW, QUIET_SESSIONS, StartupWindow
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


async def test_roots_asked_inside_a_call_teach_nothing_about_the_session() -> None:
    """A tool that asks roots inside a call, the session's first included: that call's question only, so
    later calls are not asked (issue 29 item 13: every later call began with an extra roots round)."""
    roots = SessionRoots(refuse, hold=True, window=StartupWindow())
    roots.opened()
    roots.begin_call()
    assert roots.answered(4, A) is False
    assert not roots.asks_unprompted
    roots.hold(roots_list(5))  # asked in a call that ended first: the next call asks it, once
    assert not roots.asks_unprompted
    assert [r.id for r in roots.take_held()] == [5]


async def test_the_first_call_waits_for_the_start_up_request_and_the_upstream_learns() -> None:
    window = StartupWindow()
    assert window.seconds == FIRST_WINDOW
    roots = SessionRoots(refuse, hold=True, window=window)
    roots.opened()
    settling = asyncio.create_task(roots.settle())
    await asyncio.sleep(0)  # settle() waits for the start-up request
    assert not settling.done()
    assert roots.answer(roots_list(0)) is None  # arrives in the window: held, the wait ends
    await asyncio.wait_for(settling, 5)
    assert roots.asks_unprompted
    assert window.seconds == MIN_WINDOW  # 3 x how late it came (here at once), bounded
    asked_late = SessionRoots(refuse, hold=True, window=window, clock=(clock := Clock()))
    asked_late.opened()
    clock.now += 10.0
    assert asked_late.answer(roots_list(1)) is None
    assert window.seconds == MAX_WINDOW


async def test_an_upstream_whose_sessions_never_ask_is_not_waited_for() -> None:
    window = StartupWindow()
    for _ in range(QUIET_SESSIONS):
        roots = SessionRoots(refuse, hold=True, window=window, clock=(clock := Clock()))
        roots.opened()
        clock.now += FIRST_WINDOW  # the window went by with nothing asked
        await asyncio.wait_for(roots.settle(), 5)
        assert not roots.asks_unprompted
    assert window.seconds == 0.0
    for hold, calls in ((False, 0), (True, 1)):  # nothing to wait for: no roots declared, not the first call
        other = SessionRoots(refuse, hold=hold, window=StartupWindow())
        other.opened()
        for _ in range(calls):
            other.begin_call()
        settling = asyncio.create_task(other.settle())
        await asyncio.sleep(0)
        assert settling.done()  # returned at once
