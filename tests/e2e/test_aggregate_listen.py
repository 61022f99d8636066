"""`subscriptions/listen` on an aggregated route whose members include a 2026-07-28-only upstream (the mcp
2.3.0 SDK's server, tests/fixtures/mcp2_server.py): a modern member's list_changed (its `add_tool` adds a
tool at run time and publishes it on its own listen streams) reaches the aggregate's listener beside a
legacy member's (FastMCP 1.30's `change_tools`), in either route order."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import peers
import pytest
import pytest_asyncio

from e2e.harness import NO_ROOTS_CAPS, RawClient, RunningProxy, running_proxy
from e2e.test_aggregate import all_names, text_of
from e2e.test_listen import SUB_ID, listening
from proxy.config import FrontConfig, RouteConfig, RouteMember, UpstreamConfig

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session")]


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def mixed(fastmcp_url: str) -> AsyncIterator[RunningProxy]:
    routes = (
        RouteConfig("legacy-first", (RouteMember("fast"), RouteMember("modern"))),
        RouteConfig("modern-first", (RouteMember("modern"), RouteMember("fast"))),
    )
    async with (
        peers.start_mcp2_server() as modern,
        running_proxy(
            fastmcp_url,
            names=("fast",),
            extra=(UpstreamConfig(name="modern", url=str(modern)),),
            routes=routes,
            front=FrontConfig(keepalive_s=0.2),
        ) as proxy,
    ):
        yield proxy


@pytest.mark.parametrize("route", ["legacy-first", "modern-first"])
async def test_list_changed_from_a_modern_member_reaches_the_aggregates_listener(
    mixed: RunningProxy, route: str
) -> None:
    async with aiohttp.ClientSession() as http:
        client = RawClient(
            mixed.url.replace("/mcp", f"/servers/{route}/mcp"), http, capabilities=dict(NO_ROOTS_CAPS)
        )
        async with listening(client, {"toolsListChanged": True}) as stream:
            ack = await stream.next()
            assert ack["method"] == "notifications/subscriptions/acknowledged"
            assert ack["params"]["notifications"] == {"toolsListChanged": True}
            listen_id = ack["params"]["_meta"][SUB_ID]
            added = f"added_{route.replace('-', '_')}"
            assert int(text_of(await client.call("modern__add_tool", {"name": added}))) >= 5
            note = await stream.next()
            assert note == {
                "jsonrpc": "2.0",
                "method": "notifications/tools/list_changed",
                "params": {"_meta": {SUB_ID: listen_id}},
            }
            assert int(text_of(await client.call("fast__change_tools"))) >= 2  # the legacy member's too
            note = await stream.next()
            assert note["method"] == "notifications/tools/list_changed"
            assert note["params"]["_meta"][SUB_ID] == listen_id
            assert await stream.silent(0.5)  # the modern member's acknowledgement is not relayed
        names, _ = await all_names(client)
        assert f"modern__{added}" in names  # the change the notification announced
        assert text_of(await client.call(f"modern__{added}", {"text": "new"})) == "new"
