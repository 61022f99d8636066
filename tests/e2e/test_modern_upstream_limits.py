"""A 2026-07-28 upstream's answer is bounded by `upstreams[].max_message_bytes` however it comes: the scripted
upstream (tests/e2e/modern_scripted.py) sends a decompression bomb, a few KB on the wire with a true
Content-Length that aiohttp inflates to many times the limit, through the native relay."""

from __future__ import annotations

import aiohttp
import pytest

from e2e.harness import RawClient, running_proxy
from e2e.modern_scripted import scripted_modern
from proxy.config import UpstreamConfig

pytestmark = pytest.mark.asyncio(loop_scope="session")

LIMIT = 1 << 20


async def test_a_compressed_answer_over_the_limit_fails_the_call_without_inflating_it() -> None:
    async with scripted_modern() as upstream:
        config = UpstreamConfig(name="default", url=upstream.url, era="modern", max_message_bytes=LIMIT)
        async with running_proxy(config) as proxy, aiohttp.ClientSession() as http:
            client = RawClient(proxy.url, http)
            small = await client.call("bomb", {"size": 1000})  # compressed and small: relayed as it is
            assert small.result["content"][0]["text"] == "x" * 1000
            bomb = await client.call("bomb", {"size": 64 * LIMIT})  # ~64 KB on the wire, 64 MiB inflated
            assert bomb.status == 200
            # The relay's wording for any upstream failure; the reason (the limit) is in the proxy's log.
            assert bomb.error == {
                "code": -31001,
                "message": "Upstream 'default' unavailable (details in the proxy log under this request's "
                "X-Request-Id)",
            }, str(bomb.body)[:300]
            again = await client.call("bomb", {"size": 10})  # the upstream and the proxy carry on
            assert again.result["content"][0]["text"] == "x" * 10
