"""SEP-2260: a server request with no client call in flight. server-everything really sends one: `roots/list`
on its standalone stream ~350 ms after `initialized`. The proxy refuses it with -32602, unless the config
gives static roots, which it then answers with."""

from __future__ import annotations

import asyncio

import aiohttp
import peers
import pytest

from e2e.harness import RawClient, running_proxy
from proxy.config import StaticRoot

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session")]

ROOTS_ONLY = {"roots": {}}


async def open_idle_session(client: RawClient) -> None:
    """server/discover opens a session with the client's capabilities; then let it sit with no call."""
    assert (await client.request("server/discover")).status == 200
    await asyncio.sleep(1.0)


async def test_refused_without_static_roots() -> None:
    async with (
        peers.start_server_everything() as url,
        running_proxy(url) as proxy,
        aiohttp.ClientSession() as http,
    ):
        client = RawClient(proxy.url, http, capabilities=dict(ROOTS_ONLY))
        await open_idle_session(client)
        log = url.peer.log_text()
        assert "Failed to request roots from client" in log
        assert "-32602" in log
        # The tool then asks again, inside a call: now it reaches the client as an input request.
        first = await client.call("get-roots-list")
        assert [r["method"] for r in first.result["inputRequests"].values()] == ["roots/list"]
        (key,) = first.result["inputRequests"]
        final = await client.retry(
            first, {key: {"roots": [{"uri": "file:///from/client"}]}}, "get-roots-list"
        )
        assert "file:///from/client" in final.result["content"][0]["text"]


async def test_answered_from_static_roots() -> None:
    roots = (StaticRoot(uri="file:///srv/static", name="static"),)
    async with (
        peers.start_server_everything() as url,
        running_proxy(url, static_roots=roots) as proxy,
        aiohttp.ClientSession() as http,
    ):
        client = RawClient(proxy.url, http, capabilities=dict(ROOTS_ONLY))
        await open_idle_session(client)
        reply = await client.call("get-roots-list")  # cached by the server: no round trip to the client
        assert reply.result["resultType"] == "complete"
        assert "file:///srv/static" in reply.result["content"][0]["text"]
