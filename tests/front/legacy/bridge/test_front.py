"""The legacy bridge's pure helpers, and what it does with upstream messages no GET stream has taken."""

from __future__ import annotations

import asyncio
from typing import Any

from waiting import eventually

from proxy.config import UpstreamConfig
from proxy.front.legacy.bridge.session import BridgedSession, BridgeSettings
from proxy.front.legacy.bridge.wire import (
    declared_capabilities,
    initialize_result,
    offered_versions,
    upstream_cancel,
    with_id,
)
from proxy.upstream.base import ServerInfo
from proxy.wire import jsonrpc, mcp

ALL = mcp.LEGACY_VERSIONS


def test_the_clients_version_first_then_older_configured_ones() -> None:
    assert offered_versions("2025-06-18", ALL) == ("2025-06-18", "2025-03-26", "2024-11-05")
    assert offered_versions("2025-11-25", ALL) == ALL
    assert offered_versions("2024-11-05", ALL) == ("2024-11-05",)
    assert offered_versions("2025-11-25", ("2025-06-18",)) == ("2025-06-18",)  # never beyond the config
    for odd in ("2026-07-28", "1999-01-01", 20251125, None):
        assert offered_versions(odd, ALL) == ALL  # the upstream picks; the client decides
    assert offered_versions("2024-11-05", ("2025-06-18",)) == ("2025-06-18",)


def test_capabilities_are_declared_as_they_are() -> None:
    caps = {"roots": {"listChanged": True}, "elicitation": {"url": {}}, "experimental": {"x": 1}}
    assert declared_capabilities({"capabilities": caps}) == caps
    assert declared_capabilities({"capabilities": "nope"}) == {}
    assert declared_capabilities({}) == {}


def test_initialize_result() -> None:
    info = ServerInfo("2025-06-18", {"tools": {}}, {"name": "s", "version": "1"}, None)
    assert initialize_result(info) == {
        "protocolVersion": "2025-06-18",
        "capabilities": {"tools": {}},
        "serverInfo": {"name": "s", "version": "1"},
    }
    assert initialize_result(ServerInfo("2025-06-18", {}, {}, "be nice"))["instructions"] == "be nice"


def test_ids_are_mapped_both_ways() -> None:
    assert with_id(jsonrpc.Result(7, {"a": 1}), "c1") == jsonrpc.Result("c1", {"a": 1})
    error = jsonrpc.error(7, -1, "no")
    assert with_id(error, 3) == jsonrpc.error(3, -1, "no")
    note = jsonrpc.Notification(mcp.CANCELLED, {"requestId": "c1", "reason": "user"})
    assert upstream_cancel(note, "c1", 7) == jsonrpc.Notification(
        mcp.CANCELLED, {"requestId": 7, "reason": "user"}
    )
    assert upstream_cancel(note, "c2", 7) is None  # not the call in flight: never passed on
    assert upstream_cancel(jsonrpc.Notification(mcp.CANCELLED, {"requestId": True}), 1, 7) is None


class FakeSession:
    alive = True

    def __init__(self) -> None:
        self.sent: list[jsonrpc.Message] = []

    async def send(self, message: jsonrpc.Response | jsonrpc.Notification) -> None:
        self.sent.append(message)

    async def close(self) -> None:
        self.alive = False

    def __getattr__(self, name: str) -> Any:  # the rest of UpstreamSession is not used here
        raise AttributeError(name)


def refuse(req: jsonrpc.Request) -> jsonrpc.Response:
    return jsonrpc.error(req.id, jsonrpc.INVALID_PARAMS, "no call in flight")


def bridged(**settings: Any) -> tuple[BridgedSession, FakeSession]:
    session = FakeSession()
    b = BridgedSession(
        UpstreamConfig(name="u", transport="stdio", command="x"), "p", BridgeSettings(**settings), refuse
    )
    b.session = session  # type: ignore[assignment]
    return b, session


ROOTS = jsonrpc.Request(3, mcp.ROOTS, {})
CHANGED = jsonrpc.Notification("notifications/tools/list_changed", {})


async def test_held_requests_get_the_no_call_answer_when_no_get_stream_comes() -> None:
    b, session = bridged(get_grace=0.05)
    assert b.no_call(ROOTS) is None  # held for the GET stream
    b.notify(CHANGED)
    assert list(b.held) == [ROOTS, CHANGED]
    await eventually(lambda: session.sent == [refuse(ROOTS)], "the held request refused after the grace")
    assert not b.held


async def test_a_get_stream_that_attaches_in_time_takes_them() -> None:
    b, session = bridged(get_grace=0.05)
    b.no_call(ROOTS)
    b.attach()
    await asyncio.sleep(0.2)  # a negative check: past the 50 ms grace nothing is sent
    assert session.sent == [] and list(b.held) == [ROOTS]
    b.held.clear()
    b.detach()
    await b.close()


async def test_a_request_that_cannot_be_held_is_answered_at_once() -> None:
    b, _ = bridged(max_held=1)
    b.notify(CHANGED)
    assert b.no_call(ROOTS) == refuse(ROOTS)
    await b.close()
    assert b.no_call(ROOTS) == refuse(ROOTS)


async def test_closing_wakes_the_get_streams() -> None:
    b, session = bridged()
    b.arrived.clear()
    await b.close()
    assert b.arrived.is_set() and not b.alive and not session.alive
