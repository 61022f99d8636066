"""The upstream crashes, restarts or hangs: clear errors, nothing re-run, resources freed, recovery without a
proxy restart."""

from __future__ import annotations

import asyncio
import signal

import aiohttp
import peers
import pytest

from e2e.harness import RawClient, accept_name, running_proxy

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session")]


async def test_upstream_killed_mid_call_and_restarted() -> None:
    port = peers.free_port()
    async with (
        aiohttp.ClientSession() as http,
        peers.start_fastmcp(port=port) as url,
        running_proxy(url) as proxy,
    ):
        client = RawClient(proxy.url, http)
        assert (await client.call("echo", {"text": "warm"})).result["content"][0]["text"] == "warm"
        parked = await client.call("ask_name")
        url.peer.process.send_signal(signal.SIGKILL)
        await asyncio.wait_for(url.peer.process.wait(), 10)

        # The parked call: its upstream is gone — a clear error, not a hang, and never re-run.
        lost = await client.retry(parked, {"elicit-1": accept_name("x")}, "ask_name")
        assert lost.error["code"] == -31001
        assert "not re-run" in lost.error["message"]
        # A new call while the upstream is down: a clear error too.
        down = await client.call("echo", {"text": "down"})
        assert down.error["code"] == -31001
        assert proxy.live == 0  # nothing left behind

        async with peers.start_fastmcp(port=port):
            # Restarted: it no longer knows the pooled sessions (404); new calls just work.
            back = await client.call("echo", {"text": "back"})
            assert back.result["content"][0]["text"] == "back"
            listed = await client.request("tools/list")
            assert listed.result["resultType"] == "complete"
            again = await client.call("ask_name")
            final = await client.retry(again, {"elicit-1": accept_name("Again")}, "ask_name")
            assert final.result["content"][0]["text"] == "accept:Again"


async def test_upstream_hang_is_bounded(fastmcp_url: str) -> None:
    async with running_proxy(fastmcp_url, call_timeout_s=0.5) as proxy, aiohttp.ClientSession() as http:
        client = RawClient(proxy.url, http)
        reply = await client.call("slow_echo", {"text": "never", "delay_s": 5})
        assert reply.error["code"] == -31004
        assert "cancelled upstream" in reply.error["message"]
        assert proxy.live == 0
        assert (await client.call("echo", {"text": "next"})).result["content"][0]["text"] == "next"
