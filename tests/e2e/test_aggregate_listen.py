"""`subscriptions/listen` on an aggregated route whose members include a 2026-07-28-only upstream (the mcp
2.3.0 SDK's server, tests/fixtures/mcp2_server.py): a modern member's list_changed (its `add_tool` adds a
tool at run time and publishes it on its own listen streams) reaches the aggregate's listener beside a
legacy member's (FastMCP 1.30's `change_tools`), in either route order."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import aiohttp
import peers
import pytest
import pytest_asyncio
from structlog.testing import capture_logs

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


async def test_a_resource_subscription_goes_to_the_modern_member_that_listed_the_uri(
    mixed: RunningProxy,
) -> None:
    """`modern://status` is the mcp 2.3.0 server's: the subscription goes into the proxy's listen to it
    (FastMCP, first in route order, takes subscriptions too), and the server's update reaches the client;
    FastMCP's own URI is subscribed on FastMCP's session beside it."""
    uri = "modern://status"
    async with aiohttp.ClientSession() as http:
        client = RawClient(
            mixed.url.replace("/mcp", "/servers/legacy-first/mcp"), http, capabilities=dict(NO_ROOTS_CAPS)
        )
        read = await client.request("resources/read", {"uri": uri})
        assert read.result["contents"][0]["text"] == "ok"
        async with listening(client, {"resourceSubscriptions": [uri, "fixture://secret"]}) as stream:
            ack = await stream.next()
            assert ack["params"]["notifications"] == {"resourceSubscriptions": ["fixture://secret", uri]}
            assert text_of(await client.call("fast__subscribed", {"uri": uri})) == "0"  # not FastMCP's
            assert text_of(await client.call("modern__touch_resource", {"uri": uri})) == "1"
            update = await stream.next()
            assert update["method"] == "notifications/resources/updated"
            assert update["params"]["uri"] == uri
            assert update["params"]["_meta"][SUB_ID] == ack["params"]["_meta"][SUB_ID]
            assert text_of(await client.call("fast__touch_resource", {"uri": "fixture://secret"})) == "1"
            assert (await stream.next())["params"]["uri"] == "fixture://secret"


async def test_a_modern_member_that_does_not_acknowledge_is_left_out(fastmcp_url: str) -> None:
    """The mcp 2.3.0 server stops after its era is known: the route's listen goes on with the legacy member
    (logged), and a route whose only member it is refuses the listen with -31001, as for a legacy one."""
    routes = (
        RouteConfig("mix", (RouteMember("modern"), RouteMember("fast"))),
        RouteConfig("alone", (RouteMember("modern"),)),
    )
    async with contextlib.AsyncExitStack() as stack:
        server = contextlib.AsyncExitStack()
        modern = await server.enter_async_context(peers.start_mcp2_server())
        stack.push_async_callback(server.aclose)
        proxy = await stack.enter_async_context(
            running_proxy(
                fastmcp_url,
                names=("fast",),
                extra=(UpstreamConfig(name="modern", url=str(modern)),),
                routes=routes,
            )
        )
        http = await stack.enter_async_context(aiohttp.ClientSession())

        def client(route: str) -> RawClient:
            url = proxy.url.replace("/mcp", f"/servers/{route}/mcp")
            return RawClient(url, http, capabilities=dict(NO_ROOTS_CAPS))

        mix = client("mix")
        assert text_of(await mix.call("modern__echo", {"text": "up"})) == "up"  # its era is known
        await server.aclose()
        with capture_logs() as logs:
            async with listening(mix, {"toolsListChanged": True}) as stream:
                ack = await stream.next()
                assert ack["params"]["notifications"] == {"toolsListChanged": True}
                assert int(text_of(await mix.call("fast__change_tools"))) >= 2
                assert (await stream.next())["method"] == "notifications/tools/list_changed"
        left = [e for e in logs if e.get("event") == "listen.upstream_left_out"]
        assert [e["upstream"] for e in left] == ["modern"], left
        alone = client("alone")
        body = alone.body("subscriptions/listen", {"notifications": {"toolsListChanged": True}})
        refused = await alone.send(body)
        assert refused.error["code"] == -31001, refused.body
        assert refused.error["message"].startswith("Upstream 'modern' unavailable")


async def test_a_two_era_member_without_listen_is_left_out_and_the_others_heard(fastmcp_url: str) -> None:
    """FastMCP 4.2.3 serves no subscriptions/listen (-32601, as on its own route): the route's listen goes
    on with the legacy member, the refusal logged."""
    route = RouteConfig("pair", (RouteMember("four"), RouteMember("fast")))
    async with (
        peers.start_fastmcp4() as four,
        running_proxy(
            fastmcp_url,
            names=("fast",),
            extra=(UpstreamConfig(name="four", url=str(four)),),
            routes=(route,),
        ) as proxy,
        aiohttp.ClientSession() as http,
    ):
        client = RawClient(
            proxy.url.replace("/mcp", "/servers/pair/mcp"), http, capabilities=dict(NO_ROOTS_CAPS)
        )
        assert text_of(await client.call("four__echo", {"text": "4"})) == "4"  # the native relay
        with capture_logs() as logs:
            async with listening(client, {"toolsListChanged": True}) as stream:
                ack = await stream.next()
                assert ack["params"]["notifications"] == {"toolsListChanged": True}
                assert int(text_of(await client.call("fast__change_tools"))) >= 2
                assert (await stream.next())["method"] == "notifications/tools/list_changed"
        (left,) = [e for e in logs if e.get("event") == "listen.upstream_left_out"]
        assert left["upstream"] == "four" and left["log_level"] == "info", left  # usual: not a warning
