"""A legacy client of a 2026-07-28 upstream hangs up while its mirrored call waits for its inline answer
(legacy/mirror/calls.py, mirror/hangup.py): the proxy lets the call go as soon as the connection is lost,
by an event, not at its next look.

The proxy runs with aiohttp's own default `handler_cancellation=False` (an app run by another runner):
nothing cancels the handler when the client goes, so the mirror's watch of the connection is what notices.
Every timer of the wait is far off (keep-alives every 15 s, answers awaited for calls.parked_ttl_s), so a
release within half a second can only come from the connection's loss; the code before looked once a
second and missed this bound.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import aiohttp
import pytest
import pytest_asyncio
from waiting import eventually

from e2e.harness import running_proxy
from e2e.test_mirror import ELICIT, RawLegacy, start_mirror_fixture
from proxy.process.appstate import MIRROR
from proxy.wire.sse import SSEDecoder

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session")]


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def kinds_url() -> AsyncIterator[str]:
    async with start_mirror_fixture() as url:
        yield url


async def test_a_client_that_hangs_up_mid_ask_is_let_go_at_once(kinds_url: str) -> None:
    async with (
        running_proxy(kinds_url, handler_cancellation=False) as proxy,
        aiohttp.ClientSession() as http,
    ):
        calls = proxy.app[MIRROR].calls
        client = RawLegacy(proxy.url, http)
        await client.initialize(ELICIT)
        before = await client.call("calls")
        body = {"jsonrpc": "2.0", "id": 99, "method": "tools/call", "params": {"name": "guard_counted"}}
        async with http.post(proxy.url, json=body, headers=client.headers) as resp:
            decoder = SSEDecoder()
            async for chunk in resp.content.iter_any():
                if any("elicitation/create" in e.data for e in decoder.feed(chunk)):
                    break
            assert len(calls) == 1  # waiting for the answer
            resp.close()  # gone, with the inline request unanswered
        await eventually(lambda: len(calls) == 0, "the call let go at once", limit_s=0.5, every_s=0.01)
        after = await client.call("calls")
    count = [int(json.loads(m[1][-1]["result"]["content"][0]["text"])) for m in (before, after)]
    # The refused legacy attempt (guard_counted asks natively only) and one native round; nothing retried.
    assert count[1] == count[0] + 2
