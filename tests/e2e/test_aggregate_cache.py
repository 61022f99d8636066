"""The list-page cache of aggregated routes with real peers, each behind a recording relay so the test counts
what reached it: FastMCP 1.30 (legacy; the client's Authorization forwarded to it), and two mcp 2.3.0
servers (2026-07-28; nothing of the client's forwarded to them) whose `tools/list` says `ttlMs: 60000`, one
`cacheScope: "private"`, one "public".

A page is given again within its time without asking the upstream; a list_changed the proxy hears (a
client listens) or the route's time makes the next list fresh; two clients whose credentials an upstream
tells apart never share its page, and a private page stays with its principal."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import aiohttp
import peers
import pytest
import pytest_asyncio
from waiting import eventually

from e2e.harness import NO_ROOTS_CAPS, RawClient, RunningProxy, running_proxy
from e2e.recording import Recording, recording_relay
from e2e.test_aggregate import text_of
from e2e.test_listen import listening
from proxy.config import RouteConfig, RouteMember, UpstreamConfig

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session")]

HINTS = ("--tools-ttl-ms", "60000", "--tools-scope")
MEMBERS = ("fast", "mine", "open")


@dataclass
class Trio:
    proxy: RunningProxy
    relays: dict[str, Recording]
    http: aiohttp.ClientSession

    def client(self, route: str, token: str) -> RawClient:
        url = self.proxy.url.replace("/mcp", f"/servers/{route}/mcp")
        return RawClient(url, self.http, capabilities=dict(NO_ROOTS_CAPS), authorization=f"Bearer {token}")

    def asked(self) -> dict[str, int]:
        """How many tools/list requests reached each upstream so far."""
        return {name: len(relay.posts("tools/list")) for name, relay in self.relays.items()}


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def trio(fastmcp_url: str) -> AsyncIterator[Trio]:
    routes = (
        RouteConfig("trio", tuple(RouteMember(m) for m in MEMBERS), list_cache_ms=60_000),
        RouteConfig("brief", (RouteMember("fast"), RouteMember("open")), list_cache_ms=300),
    )
    async with contextlib.AsyncExitStack() as stack:
        mine = await stack.enter_async_context(peers.start_mcp2_server(args=(*HINTS, "private")))
        open_ = await stack.enter_async_context(peers.start_mcp2_server(args=(*HINTS, "public")))
        relays = {
            name: await stack.enter_async_context(recording_relay(url))
            for name, url in (("fast", fastmcp_url), ("mine", str(mine)), ("open", str(open_)))
        }
        for relay in relays.values():
            relay.flowing.set()
        fast = UpstreamConfig(name="fast", url=relays["fast"].url, forward_headers=("authorization",))
        extra = tuple(  # nothing of the client's goes to these two: they cannot tell clients apart
            UpstreamConfig(name=n, url=relays[n].url, forward_headers=()) for n in ("mine", "open")
        )
        proxy = await stack.enter_async_context(
            running_proxy(fast, names=("fast",), extra=extra, routes=routes)
        )
        http = await stack.enter_async_context(aiohttp.ClientSession())
        yield Trio(proxy, relays, http)


def names(reply: Any) -> list[str]:
    return [tool["name"] for tool in reply.result["tools"]]


async def test_a_cached_list_is_served_within_its_ttl_without_asking_the_upstreams(trio: Trio) -> None:
    client = trio.client("trio", "cached")
    first = await client.request("tools/list")
    asked = trio.asked()
    again = await client.request("tools/list")
    assert trio.asked() == asked  # no upstream was asked the second time
    assert names(again) == names(first)
    assert {n.split("__")[0] for n in names(first)} == set(MEMBERS)
    assert 0 < again.result["ttlMs"] <= 60_000  # what the proxy would give again, no longer
    assert again.result["cacheScope"] == "private"  # a legacy page says nothing of its scope


async def test_two_principals_never_share_a_page_their_upstream_tells_apart(trio: Trio) -> None:
    alice, bob = trio.client("trio", "alice"), trio.client("trio", "bob")
    await alice.request("tools/list")
    before = trio.asked()
    await bob.request("tools/list")
    after = trio.asked()
    assert after["fast"] == before["fast"] + 1  # Bob's Authorization goes to FastMCP: its own page
    assert trio.relays["fast"].posts("tools/list")[-1].headers["authorization"] == "Bearer bob"
    assert after["mine"] == before["mine"] + 1  # "private": never another principal's
    assert after["open"] == before["open"]  # "public", and both send it the same: one page
    await alice.request("tools/list")
    await bob.request("tools/list")
    assert trio.asked() == after


async def test_list_changed_makes_the_next_list_fresh(trio: Trio) -> None:
    client = trio.client("trio", "listener")
    await client.request("tools/list")
    async with listening(client, {"toolsListChanged": True}) as stream:
        ack = await stream.next()
        assert ack["method"] == "notifications/subscriptions/acknowledged"
        assert int(text_of(await client.call("fast__change_tools"))) >= 1  # the legacy member's
        assert (await stream.next())["method"] == "notifications/tools/list_changed"
        before = trio.asked()
        await client.request("tools/list")
        assert trio.asked() == {**before, "fast": before["fast"] + 1}  # FastMCP's page only, asked again
        assert int(text_of(await client.call("mine__add_tool", {"name": "fresh"}))) >= 5  # the modern one's
        assert (await stream.next())["method"] == "notifications/tools/list_changed"
        listed = await client.request("tools/list")
    assert "mine__fresh" in names(listed)  # within its 60 s, because the proxy heard the change
    assert text_of(await client.call("mine__fresh", {"text": "new"})) == "new"


async def test_the_routes_time_makes_the_next_list_fresh(trio: Trio) -> None:
    client = trio.client("brief", "brief")
    await client.request("tools/list")
    before = trio.asked()
    await asyncio.sleep(0.6)  # past the route's list_cache_ms (300)
    listed = await client.request("tools/list")
    assert trio.asked()["fast"] == before["fast"] + 1
    assert listed.result["ttlMs"] <= 300


async def test_a_list_with_params_of_its_own_is_always_asked(trio: Trio) -> None:
    client = trio.client("trio", "progress")
    await client.request("tools/list")
    before = trio.asked()
    body = client.body("tools/list")
    body["params"]["_meta"]["progressToken"] = "p1"  # goes upstream with the request: part of what it asks
    await client.send(body)
    assert trio.asked()["fast"] == before["fast"] + 1


async def test_list_changed_heard_on_a_pooled_session_without_any_listener(trio: Trio) -> None:
    """FastMCP announces a changed list to every live session, the proxy's pooled ones too (on their GET
    streams): no client needs to listen for the cached page to go."""
    client = trio.client("trio", "unheard")
    await client.request("tools/list")
    before = trio.asked()
    assert int(text_of(await client.call("fast__change_tools"))) >= 1

    async def asked_again() -> bool:  # the notification travels on another connection than the answer
        await client.request("tools/list")
        return bool(trio.asked()["fast"] > before["fast"])

    await eventually(asked_again, "the route to ask fast again", seen=trio.asked)
    assert trio.asked()["fast"] == before["fast"] + 1  # asked again once, well within the route's 60 s
    assert trio.asked()["mine"] == before["mine"]
