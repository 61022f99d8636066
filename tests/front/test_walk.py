"""The walk of one request through the proxy's modules: how often its decision path enters each module.

A `sys.setprofile` hook counts, while one request is handled by a real proxy in process, every *visit*: a
proxy function called (a coroutine's first step, not its resumptions after an await) from a function of
another proxy module, in the request's own context (its request id, which the tasks it starts inherit). The
issue (42) counted 47 stays in 19 modules for a 2026-07-28 request, `front/modern/front.py` entered 9 times:
the job was chosen in four places, each handing the request back with `None`. With the job planned once
(front/plan.py) each module of the decision path is entered at most twice (before: the native relay's
module three times — may it take the request, is the upstream modern, relay it; the mirror's twice — does it
take the request, serve it). The report also counts *stays* (every arrival in a module: a call, a
resumption, a return from a callee in another module), the issue's measure; a dataclass's generated
`__init__` is no step of the walk.

Run with `-s` to see the counts: `pytest -s -n 0 tests/front/test_walk.py`.
"""

from __future__ import annotations

import collections
import contextlib
import json
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

import aiohttp
import peers
import pytest
from e2e.harness import RawClient, running_proxy
from e2e.modern_scripted import scripted_modern

from proxy.front.endpoint import _REQUEST_ID
from proxy.front.request_ids import REQUEST_ID_HEADER

pytestmark = pytest.mark.asyncio(loop_scope="session")

CO_COROUTINE = 0x80 | 0x100 | 0x200  # CO_COROUTINE | CO_ITERABLE_COROUTINE | CO_ASYNC_GENERATOR
# The front modules every request's decision path goes through at most this often (the goal).
MAX_FRONT_VISITS = 2
LEGACY_VERSION = "2025-11-25"
# The modules that choose a request's job or run it (the sinks they write to — reply, bridge_streams — are
# called once per thing written, and counted in the report, not bounded).
DECISION_PATH = frozenset(
    {
        "proxy.front.endpoint",
        "proxy.front.plan",
        "proxy.front.dispatch",
        "proxy.front.modern.front",
        "proxy.front.modern.pipeline",
        "proxy.front.modern.relay.native",
        "proxy.front.modern.inner",
        "proxy.front.legacy.front",
        "proxy.front.legacy.mirror.front",
        "proxy.front.legacy.mirror.calls",
        "proxy.front.legacy.bridge.front",
    }
)


@dataclass
class Walk:
    visits: collections.Counter[str] = field(default_factory=collections.Counter)  # first entries
    # Stays, as the issue counted them: each time the walk arrives in a module, by a call, a resumption or
    # a return from a callee in another module.
    stays: collections.Counter[str] = field(default_factory=collections.Counter)
    here: str = ""


@contextlib.contextmanager
def walked(rid: str) -> Iterator[Walk]:
    """Visits (and stays) per proxy module while the request `rid` is handled (see the module's docstring)."""
    walk = Walk()
    started: set[int] = set()  # coroutine frames already entered: their resumptions are not visits
    kept: list[FrameType] = []  # so a frame's id is not reused by another while the walk lasts

    def profile(frame: FrameType, event: str, _: Any) -> None:
        if event not in {"call", "return"} or _REQUEST_ID.get(None) != rid:
            return
        module = frame.f_globals.get("__name__", "")
        back = frame.f_back
        caller = back.f_globals.get("__name__", "") if back is not None else ""
        if event == "return":
            if caller.startswith("proxy.") and caller != walk.here:
                walk.stays[caller] += 1
                walk.here = caller
            return
        if not module.startswith("proxy.") or frame.f_code.co_filename.startswith("<"):
            return  # (a dataclass's generated __init__: a value made, no step of the walk)
        if module != walk.here:
            walk.stays[module] += 1
            walk.here = module
        if caller == module or not caller.startswith("proxy."):
            return
        if frame.f_code.co_flags & CO_COROUTINE:
            if id(frame) in started:
                return
            started.add(id(frame))
            kept.append(frame)
        walk.visits[module] += 1

    sys.setprofile(profile)
    try:
        yield walk
    finally:
        sys.setprofile(None)


def report(name: str, walk: Walk) -> str:
    visits, stays = walk.visits, walk.stays
    lines = [f"{name}: {sum(visits.values())} visits ({sum(stays.values())} stays) in {len(visits)} modules"]
    lines += [f"  {count:3d} {stays[module]:3d}  {module}" for module, count in visits.most_common()]
    text = "\n".join(lines)
    print(text)
    return text


def front_over(walk: Walk, limit: int) -> dict[str, int]:
    """The front modules of the decision path entered more than `limit` times."""
    return {m: n for m, n in walk.visits.items() if m in DECISION_PATH and n > limit}


@contextlib.asynccontextmanager
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as http:
        yield http


async def test_modern_call_relayed() -> None:
    """A 2026-07-28 tools/call to a 2026-07-28 upstream: the native relay."""
    async with scripted_modern() as upstream, running_proxy(upstream.url) as proxy, session() as http:
        upstream.lists = True  # `change_tools` answers: the number of listens open (none)
        client = RawClient(proxy.url, http)
        await client.call("change_tools")  # the era probed, sessions warm: the walk is the request's
        body = client.body("tools/call", {"name": "change_tools", "arguments": {}})
        with walked("walk-relay") as visits:
            reply = await client.send(body, {**client.headers(body), REQUEST_ID_HEADER: "walk-relay"})
        assert reply.result["content"][0]["text"] == "0"
    report("modern tools/call, relayed", visits)
    assert front_over(visits, MAX_FRONT_VISITS) == {}


@pytest.mark.peers
async def test_modern_call_adapted() -> None:
    """A 2026-07-28 tools/call to a legacy upstream (FastMCP 1.30): the proxy's MRTR over a legacy session."""
    async with peers.start_fastmcp() as url, running_proxy(url) as proxy, session() as http:
        client = RawClient(proxy.url, http)
        await client.call("add", {"a": 1, "b": 2})
        body = client.body("tools/call", {"name": "add", "arguments": {"a": 2, "b": 3}})
        with walked("walk-adapt") as visits:
            reply = await client.send(body, {**client.headers(body), REQUEST_ID_HEADER: "walk-adapt"})
        assert reply.status == 200, reply.body
    report("modern tools/call, adapted", visits)
    assert front_over(visits, MAX_FRONT_VISITS) == {}


async def test_legacy_call_mirrored() -> None:
    """A legacy client's tools/call to a 2026-07-28 upstream: the mirror."""
    async with scripted_modern() as upstream, running_proxy(upstream.url) as proxy, session() as http:
        upstream.lists = True
        sid = await _initialize(http, proxy.url)
        await _legacy_call(http, proxy.url, sid, "walk-warm")
        with walked("walk-mirror") as visits:
            answer = await _legacy_call(http, proxy.url, sid, "walk-mirror")
        assert answer["result"]["content"][0]["text"] == "0", answer
    report("legacy tools/call, mirrored", visits)
    assert front_over(visits, MAX_FRONT_VISITS) == {}


@pytest.mark.peers
async def test_legacy_call_passed_through() -> None:
    """A legacy client's tools/call to a legacy upstream (FastMCP 1.30): passed through."""
    async with peers.start_fastmcp() as url, running_proxy(url) as proxy, session() as http:
        sid = await _initialize(http, proxy.url)
        await _legacy_call(http, proxy.url, sid, "walk-warm", name="add", arguments={"a": 1, "b": 2})
        with walked("walk-pass") as visits:
            answer = await _legacy_call(
                http, proxy.url, sid, "walk-pass", name="add", arguments={"a": 2, "b": 3}
            )
        assert "result" in answer, answer
    report("legacy tools/call, passed through", visits)
    assert front_over(visits, MAX_FRONT_VISITS) == {}


async def _initialize(http: aiohttp.ClientSession, url: str) -> str:
    params = {
        "protocolVersion": LEGACY_VERSION,
        "capabilities": {},
        "clientInfo": {"name": "walk", "version": "1"},
    }
    body = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}
    async with http.post(url, json=body, headers={"Accept": "application/json, text/event-stream"}) as resp:
        assert resp.status == 200, await resp.text()
        sid = resp.headers["Mcp-Session-Id"]
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    headers = {"Accept": "application/json, text/event-stream", "Mcp-Session-Id": sid}
    async with http.post(url, json=note, headers=headers) as resp:
        assert resp.status == 202
    return sid


async def _legacy_call(
    http: aiohttp.ClientSession,
    url: str,
    sid: str,
    rid: str,
    *,
    name: str = "change_tools",
    arguments: dict[str, Any] | None = None,
) -> dict[str, Any]:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments or {}},
    }
    headers = {
        "Accept": "application/json, text/event-stream",
        "Mcp-Session-Id": sid,
        "MCP-Protocol-Version": LEGACY_VERSION,
        REQUEST_ID_HEADER: rid,
    }
    async with http.post(url, json=body, headers=headers) as resp:
        raw = await resp.text()
        assert resp.status == 200, raw
    if resp.content_type == "text/event-stream":
        datas = [line[5:].strip() for line in raw.splitlines() if line.startswith("data:")]
        answers = [
            json.loads(d) for d in datas if d and "id" in json.loads(d) and "method" not in json.loads(d)
        ]
        return answers[-1]  # type: ignore[no-any-return]
    return json.loads(raw)  # type: ignore[no-any-return]
