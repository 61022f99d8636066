"""Request-scoped notifications and cancellation (2026-07-28 Streamable HTTP), against FastMCP 1.30.

Progress the legacy tool reports reaches an SSE-accepting client on that request's stream, in order, before
the result; closing the stream cancels the call upstream.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import aiohttp
import pytest
import pytest_asyncio
from waiting import eventually

from e2e.harness import RawClient, RunningProxy, running_proxy
from proxy.config import FrontConfig
from proxy.wire.sse import SSEDecoder

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session")]


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def proxy(fastmcp_url: str) -> AsyncIterator[RunningProxy]:
    async with running_proxy(fastmcp_url) as running:
        yield running


async def test_progress_arrives_in_order_before_the_result(proxy: RunningProxy) -> None:
    async with aiohttp.ClientSession() as http:
        client = RawClient(proxy.url, http)
        body = client.body(
            "tools/call",
            {"name": "progress_steps", "arguments": {"steps": 3}, "_meta": {"progressToken": "tok-1"}},
        )
        body["params"]["_meta"] = {**body["params"]["_meta"], "progressToken": "tok-1"}
        async with http.post(proxy.url, json=body, headers=client.headers(body)) as resp:
            assert resp.headers["Content-Type"].startswith("text/event-stream")
            decoder = SSEDecoder()
            events = decoder.feed(await resp.read())
    messages = [json.loads(e.data) for e in events]
    progress = [m["params"] for m in messages if m.get("method") == "notifications/progress"]
    assert [(p["progressToken"], p["progress"], p["total"]) for p in progress] == [
        ("tok-1", 1, 3),
        ("tok-1", 2, 3),
        ("tok-1", 3, 3),
    ]
    assert messages[-1]["id"] == body["id"]
    assert messages[-1]["result"]["content"][0]["text"] == "done:3"


async def test_json_only_client_gets_just_the_result(proxy: RunningProxy) -> None:
    async with aiohttp.ClientSession() as http:
        client = RawClient(proxy.url, http)
        body = client.body("tools/call", {"name": "progress_steps", "arguments": {"steps": 2}})
        body["params"]["_meta"]["progressToken"] = 7
        reply = await client.send(body, {**client.headers(body), "Accept": "application/json"})
    assert reply.result["content"][0]["text"] == "done:2"


async def test_closing_the_stream_cancels_the_call_upstream(proxy: RunningProxy) -> None:
    async with aiohttp.ClientSession() as http:
        client = RawClient(proxy.url, http)
        before = (await client.call("side_effects")).result["content"][0]["text"]
        live_before = proxy.live
        body = client.body("tools/call", {"name": "slow_count", "arguments": {"delay_s": 1.5}})
        request = asyncio.ensure_future(client.send(body))
        await eventually(lambda: proxy.live > live_before, "the call to be running in the proxy")
        request.cancel()  # the client goes away: its connection closes
        with pytest.raises(asyncio.CancelledError):
            await request
        await eventually(lambda: proxy.live == live_before, "the proxy to end the cancelled call")
        await asyncio.sleep(
            1.8
        )  # a negative check: past the tool's sleep, had it not been cancelled it would have counted
        after = (await client.call("side_effects")).result["content"][0]["text"]
    assert after == before


async def test_keepalive_comments_while_a_call_runs(fastmcp_url: str) -> None:
    async with (
        running_proxy(fastmcp_url, front=FrontConfig(keepalive_s=0.2)) as proxy,
        aiohttp.ClientSession() as http,
    ):
        client = RawClient(proxy.url, http)
        body = client.body("tools/call", {"name": "slow_echo", "arguments": {"text": "late", "delay_s": 1.0}})
        async with http.post(proxy.url, json=body, headers=client.headers(body)) as resp:
            assert resp.headers["Content-Type"].startswith("text/event-stream")
            assert resp.headers["X-Accel-Buffering"] == "no"
            raw = await resp.read()
    decoder = SSEDecoder()
    events = decoder.feed(raw)
    assert decoder.comments >= 3
    assert json.loads(events[-1].data)["result"]["content"][0]["text"] == "late"
