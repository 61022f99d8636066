"""arcade-mcp-server 1.32.1 (legacy only) asks its inline question (`context.ui.elicit`) on the session's
standalone GET stream, not on the call's POST stream, and waits for the answer without limit: a legacy client
with no GET stream open never sees the question, going direct or through the proxy alike (the call hangs).
A legacy client that opens its GET stream, as the mcp SDK clients do after initialize, is asked there and the
call completes — through the proxy (relayed, GET stream and all) exactly as going direct."""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

import aiohttp
import peers
import pytest

from e2e.harness import running_proxy
from e2e.test_mirror import ELICIT, RawLegacy
from proxy.config import UpstreamConfig

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session"), pytest.mark.timeout(120)]


async def ask_with_a_get_stream(url: str, http: aiohttp.ClientSession) -> dict[str, Any]:
    client = RawLegacy(url, http)
    await client.initialize(ELICIT)
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}  # arcade insists on it
    async with http.post(url, json=initialized, headers=client.headers) as resp:
        assert resp.status == 202
    listening = asyncio.Event()
    asked: list[dict[str, Any]] = []

    async def get_stream() -> None:
        headers = {k: v for k, v in client.headers.items() if k != "Content-Type"}
        async with http.get(url, headers={**headers, "Accept": "text/event-stream"}) as resp:
            assert resp.status == 200
            listening.set()
            async for line in resp.content:
                if line.startswith(b"data: "):
                    msg = json.loads(line[6:])
                    if msg.get("method") == "elicitation/create":
                        asked.append(msg)
                        answer = {"action": "accept", "content": {"name": "Ada"}}
                        assert await client.answer(msg["id"], answer) == 202

    stream = asyncio.ensure_future(get_stream())
    try:
        async with asyncio.timeout(30):
            await listening.wait()
            status, said = await client.call("ArcadeFixture_AskName")
    finally:
        stream.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await stream
    assert status == 200 and len(asked) == 1, (status, said, asked)
    final: dict[str, Any] = said[-1]
    return final


async def test_a_legacy_client_is_asked_inline_on_its_get_stream_as_going_direct() -> None:
    async with peers.start_arcade() as url, aiohttp.ClientSession() as http:
        direct = await ask_with_a_get_stream(url, http)
        async with running_proxy(UpstreamConfig(name="default", url=url)) as proxy:
            proxied = await ask_with_a_get_stream(proxy.url, http)
    for final in (direct, proxied):
        assert final["result"]["content"] == [{"type": "text", "text": "accept:Ada"}], final
