"""A legacy client's call of a two-era upstream's tool tries the legacy way first, and a tool that asks
natively only is sent again at 2026-07-28 (front/legacy/mirror/paths.py): one call of the client's, so it
holds one place in the call limit, never two. With a limit of one, the native tool works."""

from __future__ import annotations

import aiohttp
import peers
import pytest

from e2e.harness import running_proxy
from e2e.test_mirror import ELICIT, RawLegacy
from proxy.config import UpstreamConfig

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session"), pytest.mark.timeout(240)]


@pytest.mark.parametrize("limit", ["max_parked", "max_parked_per_principal"])
async def test_a_native_tool_for_a_legacy_client_holds_one_place_in_the_call_limit(limit: str) -> None:
    async with (
        peers.start_fastmcp4() as url,
        running_proxy(UpstreamConfig(name="default", url=url), **{limit: 1}) as proxy,
        aiohttp.ClientSession() as http,
    ):
        client = RawLegacy(proxy.url, http)
        await client.initialize(ELICIT)
        for _ in range(2):  # the first: legacy way refused, then natively; the second: natively at once
            status, said = await client.call(
                "guard_name", lambda asked: {"action": "accept", "content": {"name": "Ada"}}
            )
            assert status == 200 and said[-1].get("result", {}).get("content") == [
                {"type": "text", "text": "hello:Ada"}
            ], said
        assert proxy.parked == 0
