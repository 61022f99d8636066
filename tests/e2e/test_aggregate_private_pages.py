"""Issue 41.6: a member's `list_changed` cannot make one principal's private list page visible to another.

A 2026-07-28 member (tests/e2e/modern_scripted.py with `lists`) gets no client credential (it cannot tell
Alice from Bob) and marks each tools/list page `cacheScope: "private"`, `ttlMs` 60000; the route keeps
pages a minute (`list_cache_ms`). Each page the member gives carries its own number, so the test sees
whose page each principal got: before and after the member says its list changed (heard on Bob's listen
stream, the change made by Alice's call), each principal gets only pages fetched for it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest
import pytest_asyncio

from e2e.harness import RawClient, running_proxy
from e2e.modern_scripted import ScriptedModern, scripted_modern
from e2e.test_listen import listening
from proxy.config import RouteConfig, RouteMember, UpstreamConfig

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session")]


@pytest_asyncio.fixture(loop_scope="session")
async def upstream() -> AsyncIterator[ScriptedModern]:
    async with scripted_modern() as server:
        server.lists = True
        yield server


async def page(client: RawClient) -> str:
    reply = await client.request("tools/list")
    (tool,) = reply.result["tools"]
    assert reply.result["cacheScope"] == "private", reply.result
    return str(tool["name"])


async def test_list_changed_never_hands_one_principals_private_page_to_another(
    fastmcp_url: str, upstream: ScriptedModern
) -> None:
    modern = UpstreamConfig(name="mod", url=upstream.url, forward_headers=(), era="modern")
    route = RouteConfig("r", (RouteMember("mod"),), list_cache_ms=60_000)
    async with (
        running_proxy(fastmcp_url, names=("fast",), extra=(modern,), routes=(route,)) as proxy,
        aiohttp.ClientSession() as http,
    ):
        url = proxy.url.replace("/mcp", "/servers/r/mcp")
        alice = RawClient(url, http, authorization="Bearer alice")
        bob = RawClient(url, http, authorization="Bearer bob")
        got: dict[str, list[str]] = {"alice": [], "bob": []}
        for who, client in (("alice", alice), ("bob", bob), ("alice", alice), ("bob", bob)):
            got[who].append(await page(client))
        assert got == {"alice": ["page-1", "page-1"], "bob": ["page-2", "page-2"]}  # each its own, kept
        async with listening(bob, {"toolsListChanged": True}) as stream:
            ack = await stream.next()
            assert ack.get("method") == "notifications/subscriptions/acknowledged", ack
            told = await alice.call("change_tools")  # the member says its tools changed, to Bob's listen
            assert told.result["content"][0]["text"] == "1", told.body
            heard = await stream.next()
            assert heard.get("method") == "notifications/tools/list_changed", heard
        for who, client in (("bob", bob), ("alice", alice), ("bob", bob), ("alice", alice)):
            got[who].append(await page(client))
        assert got["bob"][2:] == ["page-3", "page-3"], got  # fetched again for Bob, never Alice's
        assert got["alice"][2:] == ["page-4", "page-4"], got
        assert upstream.listed == 4
