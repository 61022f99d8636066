"""The 2026-07-28 stdio client (proxy/upstream/modern_stdio.py) against small scripted children that
misbehave on purpose: answers out of order, a line over the limit, a child that exits mid-request, a child
that never answers."""

from __future__ import annotations

import asyncio
import sys
import textwrap

import pytest
from waiting import eventually

from proxy.config import UpstreamConfig
from proxy.upstream.base import UpstreamError
from proxy.upstream.modern_stdio import ModernChildren
from proxy.wire import jsonrpc

pytestmark = pytest.mark.asyncio

# Reads two requests, answers the second first, each with its own method name (and a progress note for
# the first, on the token the client was given).
REVERSED = """
import json, sys
a = json.loads(sys.stdin.readline()); b = json.loads(sys.stdin.readline())
token = a["params"]["_meta"].get("progressToken")
print(json.dumps({"jsonrpc": "2.0", "method": "notifications/progress",
                  "params": {"progressToken": token, "progress": 1}}), flush=True)
for m in (b, a):
    print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": {"said": m["method"]}}), flush=True)
sys.stdin.read()
"""
HUGE = """
import sys
sys.stdin.readline()
print("{" + "x" * 5000 + "}", flush=True)
sys.stdin.read()
"""
EXITS = """
import sys
sys.stdin.readline()
sys.exit(3)
"""
SILENT = """
import sys
for line in sys.stdin:
    sys.stderr.write("got " + line)
"""


def children(script: str, **extra: object) -> ModernChildren:
    up = UpstreamConfig(
        name="up", command=sys.executable, args=("-c", textwrap.dedent(script)), transport="stdio", **extra
    )  # type: ignore[arg-type]
    return ModernChildren({"up": up})


def request(rid: jsonrpc.RequestId, method: str, token: str | None = None) -> jsonrpc.Request:
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        **({"progressToken": token} if token else {}),
    }
    return jsonrpc.Request(rid, method, {"_meta": meta})


def on_the_child(kids: ModernChildren) -> bool:
    """The first request is pending on the child (so the second goes after it)."""
    child = kids.child("up")
    return child is not None and child.in_flight == 1


async def test_answers_out_of_order_reach_their_callers_under_their_own_ids() -> None:
    kids = children(REVERSED)
    notes: list[jsonrpc.Notification] = []

    async def note(item: jsonrpc.Notification) -> None:
        notes.append(item)

    try:
        first = asyncio.ensure_future(kids.request("up", request("client-a", "tools/list", "mine"), note, 10))
        await eventually(lambda: on_the_child(kids), "the first request on the child")
        second = await kids.request("up", request(7, "prompts/list"), None, 10)
        answer = await first
        assert answer == jsonrpc.Result("client-a", {"said": "tools/list"})
        assert second == jsonrpc.Result(7, {"said": "prompts/list"})
        assert [n.params["progressToken"] for n in notes] == ["mine"]  # the caller's own token back
        child = kids.child("up")
        assert child is not None and child.in_flight == 0
    finally:
        await kids.close()


async def test_a_line_over_the_limit_ends_the_child_and_fails_the_request() -> None:
    kids = children(HUGE, max_message_bytes=1024)
    try:
        with pytest.raises(
            UpstreamError, match=r"larger than 1024 bytes \(upstreams\[\]\.max_message_bytes\)"
        ):
            await kids.request("up", request(1, "tools/list"), None, 10)
        child = kids.child("up")
        assert child is not None and not child.alive
    finally:
        await kids.close()


async def test_a_child_that_exits_fails_its_waiters_and_the_next_request_starts_a_fresh_one() -> None:
    kids = children(EXITS)
    lost: list[str] = []
    kids.on_lost = lambda name, why: lost.append(f"{name}: {why}")
    try:
        with pytest.raises(UpstreamError, match="upstream process exited with code 3"):
            await kids.request("up", request(1, "tools/list"), None, 10)
        old = kids.child("up")
        assert old is not None and old.pid is not None
        assert lost == ["up: upstream process exited with code 3"]
        with pytest.raises(UpstreamError):
            await kids.request("up", request(2, "tools/list"), None, 10)
        fresh = kids.child("up")
        assert fresh is not None and fresh.pid != old.pid
    finally:
        await kids.close()


async def test_a_child_that_never_answers_times_out_and_leaves_no_waiter() -> None:
    kids = children(SILENT)
    try:
        with pytest.raises(TimeoutError):
            await kids.request("up", request(1, "tools/list"), None, 0.3)
        child = kids.child("up")
        assert child is not None and child.alive and child.in_flight == 0  # nothing left behind
    finally:
        await kids.close()


async def test_a_caller_slow_to_take_its_notes_holds_up_no_other_request() -> None:
    """The first request's progress note waits on its caller; the second's answer, behind it on the channel,
    still comes at once; the first's answer comes after its note."""
    kids = children(REVERSED)
    release = asyncio.Event()
    order: list[str] = []

    async def stuck(item: jsonrpc.Notification) -> None:
        await release.wait()
        order.append("note")

    try:
        first = asyncio.ensure_future(kids.request("up", request("a", "tools/list", "t"), stuck, 10))
        await eventually(lambda: on_the_child(kids), "the first request on the child")
        second = await kids.request("up", request("b", "prompts/list"), None, 10)
        assert second == jsonrpc.Result("b", {"said": "prompts/list"}) and not first.done()
        release.set()
        assert await first == jsonrpc.Result("a", {"said": "tools/list"})
        assert order == ["note"]
    finally:
        await kids.close()
