"""Request loops (front/loops.py), performed for real: a proxy whose upstream leads back to itself, through
a recording relay so the passes around the loop can be counted, and two proxies each configured as the
other's upstream. Without the check every pass was a new client request that opened another upstream
session (or probed the era again) until a pool limit or the era probe's 30 s timeout ended it; with it, the
request that comes back is refused at once (HTTP 508, -32600 "Request loop…") and the client gets the usual
clear error for an upstream that cannot be used."""

from __future__ import annotations

import asyncio

import aiohttp
import peers
import pytest

from e2e.harness import RawClient, running_proxy
from e2e.recording import recording_relay
from e2e.test_mirror import RawLegacy
from proxy.config import UpstreamConfig
from proxy.front.loops import LOOP

pytestmark = pytest.mark.asyncio(loop_scope="session")

UNAVAILABLE = "Upstream 'default' unavailable (details in the proxy log under this request's X-Request-Id)"


@pytest.mark.parametrize("era", ["legacy", "auto", "modern"])
async def test_a_proxy_whose_upstream_leads_back_to_itself_refuses_the_second_pass(era: str) -> None:
    port = peers.free_port()
    async with recording_relay(f"http://127.0.0.1:{port}/mcp") as relay:
        config = UpstreamConfig(name="default", url=relay.url, era=era)  # type: ignore[arg-type]
        async with running_proxy(config, port=port) as proxy, aiohttp.ClientSession() as http:
            async with asyncio.timeout(10):  # the era probe alone waited 30 s before
                reply = await RawClient(proxy.url, http).call("echo", {"text": "hi"})
                legacy = RawLegacy(proxy.url, http)
                body = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                    "protocolVersion": "2025-11-25", "capabilities": {},
                    "clientInfo": {"name": "raw", "version": "1"}}}  # fmt: skip
                async with http.post(legacy.url, json=body, headers=legacy.headers) as resp:
                    legacy_status, legacy_answer = resp.status, await resp.json()
    assert reply.error["message"] == UNAVAILABLE, reply.body
    assert legacy_status >= 400 or "error" in legacy_answer, legacy_answer
    # Every request that went around came back once and was refused there; none went around again.
    passes = len(relay.sent)
    print(f"era {era}: {passes} upstream requests went around the loop, each once")
    assert 1 <= passes <= 12, [(s.method, s.message) for s in relay.sent]
    assert all("mrtr-proxy-" in s.headers.get("via", "") for s in relay.sent)


async def test_two_proxies_each_the_others_upstream() -> None:
    """A → B → A: A's second pass is refused; B answers A with its error, A its client with its own."""
    port_a, port_b = peers.free_port(), peers.free_port()
    up_a = UpstreamConfig(name="default", url=f"http://127.0.0.1:{port_b}/mcp", era="legacy")
    up_b = UpstreamConfig(name="default", url=f"http://127.0.0.1:{port_a}/mcp", era="legacy")
    async with (
        running_proxy(up_a, port=port_a) as a,
        running_proxy(up_b, port=port_b),
        aiohttp.ClientSession() as http,
    ):
        async with asyncio.timeout(10):
            reply = await RawClient(a.url, http).call("echo", {"text": "hi"})
    assert reply.error["message"] == UNAVAILABLE, reply.body


async def test_a_request_naming_this_proxy_in_via_gets_508_and_a_json_rpc_error() -> None:
    """What the proxy that sent a looping request reads back: HTTP 508, -32600 with the reason, id null
    (the body is not read: nothing of it reaches any upstream)."""
    port = peers.free_port()
    async with recording_relay(f"http://127.0.0.1:{port}/mcp") as relay:
        config = UpstreamConfig(name="default", url=relay.url, era="legacy")
        async with running_proxy(config, port=port) as proxy, aiohttp.ClientSession() as http:
            await RawClient(proxy.url, http).call("echo", {"text": "hi"})  # learns the proxy's Via entry
            entry = relay.sent[0].headers["via"]
            sent = len(relay.sent)
            body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
            async with http.post(proxy.url, json=body, headers={"Via": f"1.0 lb, {entry}"}) as resp:
                status, answer = resp.status, await resp.json()
            assert len(relay.sent) == sent  # nothing went upstream for it
    assert status == 508
    assert answer == {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": LOOP}}
