"""A legacy client's standalone GET stream on a mirror session (front/legacy/mirror/stream.py): what a
2026-07-28 server tells its listen streams (`notifications/*/list_changed`) reaches a legacy client of an
aggregated route (a FastMCP 1.30 legacy member and the mcp 2.3.0 SDK's modern server) and of a single
modern upstream, written as a legacy server writes it: no acknowledgement, no subscription id, no result.
A raw legacy client (test_mirror.py's RawLegacy) and mcp 1.30's own ClientSession, which opens its GET
stream by itself after `initialize`."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import peers
import pytest
import pytest_asyncio
from waiting import eventually

from e2e.harness import RunningProxy, running_proxy
from e2e.test_listen import Stream
from e2e.test_mirror import RawLegacy
from proxy.config import FrontConfig, RouteConfig, RouteMember, UpstreamConfig
from proxy.process.app import drain
from proxy.process.appstate import MIRROR

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session")]

DRIVER = Path(__file__).parent / "clients" / "legacy_list_changed_client.py"
TS_DRIVER = Path(__file__).parent.parent / "interop" / "clients" / "ts_client.mjs"
TOOLS_CHANGED = {"jsonrpc": "2.0", "method": "notifications/tools/list_changed", "params": {}}


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def mixed(fastmcp_url: str) -> AsyncIterator[RunningProxy]:
    """An aggregate of a legacy member and a modern one (the mcp 2.3.0 server, also served alone)."""
    route = RouteConfig("mix", (RouteMember("fast"), RouteMember("modern")))
    async with (
        peers.start_mcp2_server() as modern,
        running_proxy(
            fastmcp_url,
            names=("fast",),
            extra=(UpstreamConfig(name="modern", url=str(modern)),),
            routes=(route,),
            front=FrontConfig(keepalive_s=0.2),
        ) as proxy,
    ):
        yield proxy


def url_of(proxy: RunningProxy, route: str) -> str:
    return proxy.url.replace("/mcp", f"/servers/{route}/mcp")


@contextlib.asynccontextmanager
async def get_stream(client: RawLegacy) -> AsyncIterator[Stream]:
    headers = {**client.headers, "Accept": "text/event-stream"}
    async with client.http.get(client.url, headers=headers) as resp:
        assert resp.status == 200, await resp.text()
        assert resp.headers["Content-Type"].startswith("text/event-stream")
        yield Stream(resp)


async def text(client: RawLegacy, name: str, arguments: dict[str, str] | None = None) -> str:
    _, messages = await client.call(name, arguments=arguments)
    value: str = messages[-1]["result"]["content"][0]["text"]
    return value


async def test_a_legacy_client_of_an_aggregate_hears_every_members_list_changed(mixed: RunningProxy) -> None:
    """The modern member's `add_tool` and the legacy member's `change_tools` each reach the GET stream as
    the plain legacy notification, and the new tool is in the route's list under its prefixed name."""
    async with aiohttp.ClientSession() as http:
        client = RawLegacy(url_of(mixed, "mix"), http)
        await client.initialize({})
        async with get_stream(client) as stream:
            assert int(await text(client, "modern__add_tool", {"name": "added_on_route"})) >= 1
            assert await stream.next() == TOOLS_CHANGED  # no acknowledgement before it, no subscription id
            assert int(await text(client, "fast__change_tools")) >= 2  # the call's session and the stream's
            assert await stream.next() == TOOLS_CHANGED
            assert await stream.silent(0.6)  # keep-alive comments only (every 0.2 s)
        _, (listed,) = await client.call("", method="tools/list", params={})
        names = {t["name"] for t in listed["result"]["tools"]}
        assert {"modern__added_on_route", "fast__change_tools"} <= names


async def test_a_legacy_client_of_a_modern_upstream_hears_list_changed(mixed: RunningProxy) -> None:
    async with aiohttp.ClientSession() as http:
        client = RawLegacy(url_of(mixed, "modern"), http)
        await client.initialize({})
        async with get_stream(client) as stream:
            assert int(await text(client, "add_tool", {"name": "added_alone"})) >= 1
            assert await stream.next() == TOOLS_CHANGED
        assert await text(client, "added_alone", {"text": "new"}) == "new"


async def test_a_second_get_of_the_session_replaces_the_first(mixed: RunningProxy) -> None:
    """One GET stream per session per replica: the newer takes its place, the older ends cleanly (its
    client may have lost it), and a change is told on the newer only."""
    async with aiohttp.ClientSession() as http:
        client = RawLegacy(url_of(mixed, "modern"), http)
        await client.initialize({})
        async with get_stream(client) as first, get_stream(client) as second:
            assert await first.next(limit_s=5.0) == {}  # ended: the end of the stream, nothing in it
            assert len(mixed.app[MIRROR].streams) == 1
            assert int(await text(client, "add_tool", {"name": "added_twice"})) >= 1
            assert await second.next() == TOOLS_CHANGED
        # The handler notices the hang-up within its tick.
        await eventually(lambda: len(mixed.app[MIRROR].streams) == 0, "the mirror to drop the stream")


async def test_a_get_stream_needs_accept_event_stream_and_the_session(mixed: RunningProxy) -> None:
    async with aiohttp.ClientSession() as http:
        client = RawLegacy(url_of(mixed, "mix"), http)
        await client.initialize({})
        async with http.get(client.url, headers={**client.headers, "Accept": "application/json"}) as resp:
            assert resp.status == 406
            assert (await resp.json())["error"]["message"] == "The GET stream is text/event-stream; accept it"
        mallory = {**client.headers, "Authorization": "Bearer mallory", "Accept": "text/event-stream"}
        async with http.get(client.url, headers=mallory) as resp:
            assert resp.status == 404  # another principal's session


async def test_mcp_1_30_client_hears_list_changed_on_its_own_get_stream(mixed: RunningProxy) -> None:
    """mcp 1.30's ClientSession opens the GET stream itself after `initialize`; its message handler gets
    `ToolListChangedNotification` for a tool the modern upstream adds, alone and through the route."""
    for url, tool in ((url_of(mixed, "modern"), "add_tool"), (url_of(mixed, "mix"), "modern__add_tool")):
        argv = [str(peers.legacy_python()), str(DRIVER), url, tool]
        run = await peers.run_once(argv, limit_s=60)
        assert run.returncode == 0 and not run.timed_out, run.stderr[-3000:]
        out = json.loads(run.stdout)
        assert out["heard"] == ["notifications/tools/list_changed"], out
        assert out["listed"], out  # the tool it added, in the list it asked for again


async def test_the_get_stream_ends_cleanly_when_the_replica_drains() -> None:
    """At drain the stream ends (the end of the stream, no result: the client opens another GET, which this
    replica refuses with 503 so that it lands elsewhere)."""
    async with (
        peers.start_mcp2_server() as modern,
        running_proxy(str(modern), drain_grace_s=0.1) as proxy,
        aiohttp.ClientSession() as http,
    ):
        client = RawLegacy(proxy.url, http)
        await client.initialize({})
        async with get_stream(client) as stream:
            drained = asyncio.ensure_future(drain(proxy.app))
            assert await stream.next(limit_s=5.0) == {}
            await drained
        async with http.get(client.url, headers={**client.headers, "Accept": "text/event-stream"}) as resp:
            assert resp.status == 503 and resp.headers["Retry-After"] == "0"
        assert len(proxy.app[MIRROR].streams) == 0


async def test_ts_client_in_legacy_mode_gets_a_refreshed_tool_list_from_its_get_stream(
    mixed: RunningProxy,
) -> None:
    """The TS client 2.4.0 in `legacy` mode, given `listChanged` for tools, opens its GET stream after
    `initialize`; a tool the route's modern member adds makes its handler list the tools again."""
    plan = [{"id": "changed", "kind": "list_changed", "name": "modern__add_tool", "args": {"name": "ts"}}]
    argv = [str(peers.node_bin()), str(TS_DRIVER), url_of(mixed, "mix"), "legacy", json.dumps(plan)]
    run = await peers.run_once(argv, limit_s=90, env={"MRTR_LIST_CHANGED": "1"})
    assert run.returncode == 0 and not run.timed_out, run.stderr[-3000:]
    out = json.loads(run.stdout)
    assert out["client"]["era"] == "legacy", out
    step = out["steps"]["changed"]
    assert not step["is_error"], out
    names = step["text"].split(",")
    assert "modern__ts_0" in names and "fast__change_tools" in names, step
    gets = [row for row in out["wire"] if row["http"] == "GET"]
    assert gets and gets[0]["status"] == 200 and gets[0]["contentType"].startswith("text/event-stream")


def updated(uri: str) -> dict[str, object]:
    return {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": uri}}


async def test_resources_subscribe_before_the_get_stream_is_heard_on_it(mixed: RunningProxy) -> None:
    """A legacy client may subscribe before its GET stream is up (mcp 1.30 opens it in the background):
    the stream asks the modern upstream for the URI's updates as it opens."""
    uri = "modern://status"
    async with aiohttp.ClientSession() as http:
        client = RawLegacy(url_of(mixed, "modern"), http)
        await client.initialize({})
        _, (subscribed,) = await client.call("", method="resources/subscribe", params={"uri": uri})
        assert subscribed["result"] == {}  # the 2026-07-28 server itself has no such method (-32601)
        async with get_stream(client) as stream:
            assert await text(client, "touch_resource", {"uri": uri}) == "1"  # its listen stream: ours
            assert await stream.next() == updated(uri)


async def test_resources_subscribed_while_the_stream_runs_go_to_the_member_that_listed_them(
    mixed: RunningProxy,
) -> None:
    """On the route, `fixture://secret` is the legacy member's (subscribed on the stream's session there),
    `modern://status` the modern member's (a listen of its own): both updates reach the GET stream; after
    `resources/unsubscribe` the modern one's no longer do."""
    legacy_uri, modern_uri = "fixture://secret", "modern://status"
    async with aiohttp.ClientSession() as http:
        client = RawLegacy(url_of(mixed, "mix"), http)
        await client.initialize({})
        async with get_stream(client) as stream:
            for uri in (legacy_uri, modern_uri):
                _, (subscribed,) = await client.call("", method="resources/subscribe", params={"uri": uri})
                assert subscribed["result"] == {}, subscribed
            assert await text(client, "fast__subscribed", {"uri": legacy_uri}) == "1"
            assert await text(client, "fast__subscribed", {"uri": modern_uri}) == "0"  # not FastMCP's
            assert await text(client, "modern__touch_resource", {"uri": modern_uri}) == "1"
            assert await stream.next() == updated(modern_uri)
            assert await text(client, "fast__touch_resource", {"uri": legacy_uri}) == "1"
            assert await stream.next() == updated(legacy_uri)
            _, (gone,) = await client.call("", method="resources/unsubscribe", params={"uri": modern_uri})
            assert gone["result"] == {}
            assert await text(client, "modern__touch_resource", {"uri": modern_uri}) == "1"
            assert await stream.silent(0.6)  # unsubscribed: not written
        _, (bad,) = await client.call("", method="resources/subscribe", params={"uri": 5})
        assert bad["error"] == {"code": -32602, "message": "params.uri must be a non-empty string"}


async def test_a_session_subscribes_to_at_most_256_resources(mixed: RunningProxy) -> None:
    """What a replica keeps for a session is bounded: the 257th URI is refused (an existing one is not)."""
    async with aiohttp.ClientSession() as http:
        client = RawLegacy(url_of(mixed, "modern"), http)
        await client.initialize({})
        for n in range(256):
            _, (ok,) = await client.call("", method="resources/subscribe", params={"uri": f"modern://{n}"})
            assert ok["result"] == {}, ok
        _, (again,) = await client.call("", method="resources/subscribe", params={"uri": "modern://0"})
        assert again["result"] == {}
        _, (refused,) = await client.call("", method="resources/subscribe", params={"uri": "modern://more"})
        assert refused["error"] == {
            "code": -32602,
            "message": "This session already subscribes to 256 resources; unsubscribe from one first",
        }


async def test_an_upstream_without_listen_answers_the_get_405_and_one_that_is_down_503() -> None:
    """FastMCP 4.2.3 (two eras) serves no subscriptions/listen (-32601): its legacy clients' GET gets the
    405 of a legacy server without a standalone stream (they stop asking). A modern upstream that went away
    after its era was known: 503 with the reason (they may ask again)."""
    async with contextlib.AsyncExitStack() as stack:
        four = await stack.enter_async_context(peers.start_fastmcp4())
        server = contextlib.AsyncExitStack()
        modern = await server.enter_async_context(peers.start_mcp2_server())
        stack.push_async_callback(server.aclose)
        proxy = await stack.enter_async_context(
            running_proxy(four, names=("four",), extra=(UpstreamConfig(name="modern", url=str(modern)),))
        )
        http = await stack.enter_async_context(aiohttp.ClientSession())
        accept = {"Accept": "text/event-stream"}
        client = RawLegacy(url_of(proxy, "four"), http)
        await client.initialize({})
        async with http.get(client.url, headers={**client.headers, **accept}) as resp:
            assert resp.status == 405 and resp.headers["Allow"] == "POST, DELETE"
            message = (await resp.json())["error"]["message"]
            assert message == "No standalone stream: the upstream sends no notifications outside a request"
        gone = RawLegacy(url_of(proxy, "modern"), http)
        await gone.initialize({})
        await server.aclose()
        async with http.get(gone.url, headers={**gone.headers, **accept}) as resp:
            assert resp.status == 503
            assert (await resp.json())["error"]["message"].startswith("Upstream 'modern' unavailable")


async def test_the_get_stream_ends_when_its_session_expires() -> None:
    """A mirror session lives `front.mirror_session_ttl_s`, then 404: its GET stream ends with it."""
    async with (
        peers.start_mcp2_server() as modern,
        running_proxy(str(modern), front=FrontConfig(mirror_session_ttl_s=2)) as proxy,
        aiohttp.ClientSession() as http,
    ):
        client = RawLegacy(proxy.url, http)
        await client.initialize({})
        async with get_stream(client) as stream:
            assert await stream.next(limit_s=10.0) == {}  # the end of the stream, nothing in it
        async with http.get(client.url, headers={**client.headers, "Accept": "text/event-stream"}) as resp:
            assert resp.status == 404
