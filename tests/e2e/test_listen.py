"""`subscriptions/listen` (SEP-2575) in front of FastMCP 1.30: the legacy server's session-wide notifications
reach a listening 2026-07-28 client, on one SSE stream, acknowledged first, stamped with the subscription id.

The fixture's `change_tools` / `change_prompts` announce a changed list to every session, `touch_resource`
updates a resource for the sessions subscribed to it (see tests/fixtures/legacy_fastmcp_server.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import peers
import pytest
import pytest_asyncio
from waiting import eventually

from e2e.harness import ALL_CAPS, RawClient, RunningProxy, running_proxy
from proxy.config import FrontConfig, TasksConfig
from proxy.process.app import STATE
from proxy.wire.sse import SSEDecoder

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session")]

SUB_ID = "io.modelcontextprotocol/subscriptionId"
TASKS_EXT = "io.modelcontextprotocol/tasks"
LISTENER = Path(__file__).parent / "clients" / "listen_client.py"


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def proxy(fastmcp_url: str) -> AsyncIterator[RunningProxy]:
    front = FrontConfig(keepalive_s=0.2)
    async with running_proxy(fastmcp_url, front=front, tasks=TasksConfig(policy="always")) as running:
        yield running


@dataclass
class Stream:
    """An open listen stream: its JSON-RPC messages as they arrive, and the keep-alive comments seen."""

    response: aiohttp.ClientResponse
    messages: list[dict[str, Any]] = field(default_factory=list)
    decoder: SSEDecoder = field(default_factory=SSEDecoder)

    async def next(self, limit_s: float = 5.0) -> dict[str, Any]:
        """The next message (bounded wait); {} when the stream ended."""
        async with asyncio.timeout(limit_s):
            while len(self.messages) == self._taken:
                chunk = await self.response.content.readany()
                if not chunk:
                    return {}
                self.messages += [json.loads(e.data) for e in self.decoder.feed(chunk) if e.data.strip()]
        self._taken += 1
        return self.messages[self._taken - 1]

    async def silent(self, for_s: float) -> bool:
        """Nothing but keep-alives for `for_s` seconds?"""
        with contextlib.suppress(TimeoutError):
            await self.next(for_s)
            return False
        return True

    _taken: int = 0


@contextlib.asynccontextmanager
async def listening(
    client: RawClient, notifications: dict[str, Any], extra: dict[str, Any] | None = None
) -> AsyncIterator[Stream]:
    body = client.body("subscriptions/listen", {"notifications": notifications, **(extra or {})})
    async with client.http.post(client.url, json=body, headers=client.headers(body)) as resp:
        assert resp.status == 200
        assert resp.headers["Content-Type"].startswith("text/event-stream")
        yield Stream(resp)


async def text(client: RawClient, tool: str, args: dict[str, Any] | None = None) -> str:
    reply = await client.call(tool, args or {})
    value: str = reply.result["content"][0]["text"]
    return value


async def test_list_changed_reaches_a_listener(proxy: RunningProxy) -> None:
    async with aiohttp.ClientSession() as http:
        client = RawClient(proxy.url, http)
        async with listening(client, {"toolsListChanged": True}) as stream:
            ack = await stream.next()
            assert ack["method"] == "notifications/subscriptions/acknowledged"
            listen_id = ack["params"]["_meta"][SUB_ID]
            assert ack["params"]["notifications"] == {"toolsListChanged": True}
            assert int(await text(client, "change_prompts")) >= 2  # not asked for: not relayed
            assert int(await text(client, "change_tools")) >= 2  # the call's session and the listener's
            note = await stream.next()
            assert note == {
                "jsonrpc": "2.0",
                "method": "notifications/tools/list_changed",
                "params": {"_meta": {SUB_ID: listen_id}},
            }
            assert await stream.silent(0.5)
            assert stream.decoder.comments >= 2  # keep-alive comments while nothing happens


async def test_resource_updates_for_subscribed_uris_and_unsubscribe_on_close(proxy: RunningProxy) -> None:
    live_before = proxy.live  # the module's proxy: what this test leaves
    uri = "fixture://watched"
    async with aiohttp.ClientSession() as http:
        client = RawClient(proxy.url, http)
        wanted = {"resourceSubscriptions": [uri], "promptsListChanged": True}
        async with listening(client, wanted) as stream:
            ack = await stream.next()
            assert ack["params"]["notifications"] == wanted
            assert await text(client, "subscribed", {"uri": uri}) == "1"  # resources/subscribe upstream
            assert await text(client, "touch_resource", {"uri": "fixture://other"}) == "0"
            assert await text(client, "touch_resource", {"uri": uri}) == "1"
            update = await stream.next()
            assert update["method"] == "notifications/resources/updated"
            assert update["params"]["uri"] == uri
            assert update["params"]["_meta"][SUB_ID] == ack["params"]["_meta"][SUB_ID]
            await text(client, "change_prompts")
            assert (await stream.next())["method"] == "notifications/prompts/list_changed"

        async def unsubscribed() -> bool:  # the client closed its stream: the proxy undoes the subscription
            return await text(client, "subscribed", {"uri": uri}) == "0"

        await eventually(unsubscribed, "the upstream subscription to be undone")
    assert proxy.live == live_before


async def test_the_filter_is_required_and_checked(proxy: RunningProxy) -> None:
    async with aiohttp.ClientSession() as http:
        client = RawClient(proxy.url, http)
        missing = await client.request("subscriptions/listen", {})
        assert missing.error["code"] == -32602
        bad = await client.request("subscriptions/listen", {"notifications": {"resourceSubscriptions": "x"}})
        assert bad.error["code"] == -32602
        no_ext = await client.request("subscriptions/listen", {"notifications": {"taskIds": ["t"]}})
        assert no_ext.error["code"] == -32021


async def test_task_status_notifications(proxy: RunningProxy) -> None:
    async with aiohttp.ClientSession() as http:
        client = RawClient(proxy.url, http, capabilities={**ALL_CAPS, "extensions": {TASKS_EXT: {}}})
        task = (await client.call("work_then_ask", {"delay_s": 0.3, "after_s": 0})).result
        async with listening(client, {"taskIds": [task["taskId"], "not-a-task"]}) as stream:
            ack = await stream.next()
            assert ack["params"]["notifications"] == {"taskIds": [task["taskId"]]}
            seen = [await stream.next()]
            assert seen[0]["method"] == "notifications/tasks"
            while seen[-1]["params"]["status"] != "input_required":
                seen.append(await stream.next())
            asking = seen[-1]["params"]
            assert list(asking["inputRequests"]) == ["elicit-1"]
            update = {"elicit-1": {"action": "accept", "content": {"name": "Lu"}}}
            await client.request("tasks/update", {"taskId": task["taskId"], "inputResponses": update})
            while seen[-1]["params"]["status"] != "completed":
                seen.append(await stream.next())
        final = seen[-1]["params"]
    assert final["result"]["content"][0]["text"] == "worked:accept:Lu"
    assert final["_meta"][SUB_ID] == ack["params"]["_meta"][SUB_ID]
    assert [n["params"]["status"] for n in seen][-3:] == ["input_required", "working", "completed"]


async def test_shutdown_ends_the_stream_gracefully(fastmcp_url: str) -> None:
    async with running_proxy(fastmcp_url) as proxy, aiohttp.ClientSession() as http:
        client = RawClient(proxy.url, http)
        async with listening(client, {"toolsListChanged": True}) as stream:
            ack = await stream.next()
            proxy.app[STATE].draining = True
            closing = await stream.next()
            assert closing == {
                "jsonrpc": "2.0",
                "id": ack["params"]["_meta"][SUB_ID],
                "result": {"resultType": "complete", "_meta": {SUB_ID: ack["params"]["_meta"][SUB_ID]}},
            }
            assert await stream.next() == {}


async def test_mcp_client_listens_through_the_proxy(proxy: RunningProxy) -> None:
    """`mcp==2.3.0`'s own `Client.listen()` (a subprocess in the client venv) receives ToolsListChanged."""
    run = asyncio.ensure_future(
        peers.run_once([str(peers.client_python()), str(LISTENER), proxy.url], limit_s=30)
    )
    async with aiohttp.ClientSession() as http:
        client = RawClient(proxy.url, http)
        for _ in range(100):  # bounded: until the client's listen stream is up (it waits for one event)
            if run.done():
                break
            await text(client, "change_tools")
            await asyncio.sleep(0.2)
    done = await run
    assert done.returncode == 0, done.stdout + done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["honored"] == {"toolsListChanged": True}
    assert out["event"] == "ToolsListChanged"
