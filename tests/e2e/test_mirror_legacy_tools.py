"""Legacy clients of a two-era upstream's `legacy_tools` (FastMCP 4.2.3's `ctx.elicit` tool `ask_name`, which
it refuses at 2026-07-28): the mirror asks the proxy's modern front in process, which runs the tool on a
legacy session and parks it; the legacy client is asked inline, its answer resumes the parked call. A cancel
between rounds ends the parked call at once (the upstream told), not at its parking deadline."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import peers
import pytest
import pytest_asyncio

from e2e.harness import running_proxy
from e2e.test_mirror import ELICIT, RawLegacy
from proxy.config import UpstreamConfig
from proxy.process.appstate import CALLS, MIRROR
from proxy.wire.sse import SSEDecoder

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session")]


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def fastmcp4_url() -> AsyncIterator[str]:
    async with peers.start_fastmcp4() as url:
        yield url


def two_era(url: str) -> UpstreamConfig:
    return UpstreamConfig(name="default", url=url, legacy_tools=("ask_name",))


def fill(value: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """Accept, with `value` in the form's one field (ctx.elicit(response_type=str) names it itself)."""

    def answer(asked: dict[str, Any]) -> dict[str, Any]:
        (field,) = asked["params"]["requestedSchema"]["properties"]
        return {"action": "accept", "content": {field: value}}

    return answer


def decline(_: dict[str, Any]) -> dict[str, Any]:
    return {"action": "decline"}


async def test_a_ctx_elicit_tool_asks_the_legacy_client_inline(fastmcp4_url: str) -> None:
    async with running_proxy(two_era(fastmcp4_url)) as proxy, aiohttp.ClientSession() as http:
        client = RawLegacy(proxy.url, http)
        await client.initialize(ELICIT)
        status, messages = await client.call("ask_name", fill("Ada"))
        assert status == 200
        asked, final = messages[0], messages[-1]
        assert asked["method"] == "elicitation/create" and asked["params"]["message"] == "What is your name?"
        assert final["id"] == 1 and final["result"]["content"][0]["text"] == "accept:Ada"
        _, messages = await client.call("ask_name", decline)
        assert messages[-1]["result"]["content"][0]["text"] == "decline"
        _, (echoed,) = await client.call("echo", arguments={"text": "plain"})  # other tools: the mirror
        assert echoed["result"]["content"][0]["text"] == "plain"
        assert proxy.app[CALLS].registry.parked_count == 0


async def test_a_cancel_between_rounds_ends_the_parked_call_at_once(fastmcp4_url: str) -> None:
    """The default parking lasts minutes; the client's notifications/cancelled ends the call now: its
    stream closes with no answer (none is due to a cancelled request) and nothing stays parked."""
    async with running_proxy(two_era(fastmcp4_url)) as proxy, aiohttp.ClientSession() as http:
        client = RawLegacy(proxy.url, http)
        await client.initialize(ELICIT)
        body = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "ask_name"}}
        seen: list[dict[str, Any]] = []
        async with asyncio.timeout(30), http.post(proxy.url, json=body, headers=client.headers) as resp:
            decoder = SSEDecoder()
            async for chunk in resp.content.iter_any():
                for event in decoder.feed(chunk):
                    if not event.data.strip():
                        continue
                    seen.append(json.loads(event.data))
                    if seen[-1].get("method") == "elicitation/create":
                        assert proxy.app[CALLS].registry.parked_count == 1
                        cancel = {
                            "jsonrpc": "2.0",
                            "method": "notifications/cancelled",
                            "params": {"requestId": 7, "reason": "changed my mind"},
                        }
                        async with http.post(proxy.url, json=cancel, headers=client.headers) as sent:
                            assert sent.status == 202
        assert [m.get("method") for m in seen] == ["elicitation/create"]  # and no answer after it
        assert proxy.app[CALLS].registry.parked_count == 0  # ended before the stream was
        assert len(proxy.app[MIRROR].calls) == 0
        _, (again,) = await client.call("echo", arguments={"text": "after"})  # the session goes on
        assert again["result"]["content"][0]["text"] == "after"
