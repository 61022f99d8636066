"""SEP-2260: a server request with no client call in flight. server-everything really sends one: `roots/list`
on its standalone stream ~350 ms after `initialized`. For a client that declared roots the session holds it
and the first call asks the client in its first round (calls/roots.py); configured static roots answer it
at once instead."""

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
    await asyncio.sleep(1.0)  # the scenario: a session that sits idle, no call


async def test_held_for_the_first_call_without_static_roots() -> None:
    async with (
        peers.start_server_everything() as url,
        running_proxy(url) as proxy,
        aiohttp.ClientSession() as http,
    ):
        client = RawClient(proxy.url, http, capabilities=dict(ROOTS_ONLY))
        await open_idle_session(client)
        assert "Failed to request roots from client" not in url.peer.log_text()  # held, not refused
        # The first call asks the held request before the call itself goes upstream; the server caches the
        # answer, so get-roots-list then shows it without asking again.
        first = await client.call("get-roots-list")
        assert [r["method"] for r in first.result["inputRequests"].values()] == ["roots/list"]
        (key,) = first.result["inputRequests"]
        final = await client.retry(
            first, {key: {"roots": [{"uri": "file:///from/client"}]}}, "get-roots-list"
        )
        assert "file:///from/client" in final.result["content"][0]["text"]
        assert "Failed to request roots from client" not in url.peer.log_text()


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
