"""Gateway mode: one proxy in front of two different legacy servers at once; one failing leaves the other's
calls intact."""

from __future__ import annotations

import asyncio
import signal

import aiohttp
import peers
import pytest

from e2e.harness import RawClient, accept_name, running_proxy
from proxy.config import UpstreamConfig

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session")]


async def test_two_upstreams_and_one_dies() -> None:
    async with (
        peers.start_fastmcp() as fastmcp,
        peers.start_server_everything() as everything,
        running_proxy(
            fastmcp, names=("fast",), extra=(UpstreamConfig(name="everything", url=str(everything)),)
        ) as proxy,
        aiohttp.ClientSession() as http,
    ):
        fast = RawClient(
            proxy.url.replace("/mcp", "/servers/fast/mcp"), http, capabilities={"elicitation": {}}
        )
        every = RawClient(
            proxy.url.replace("/mcp", "/servers/everything/mcp"), http, capabilities={"elicitation": {}}
        )
        ready = await (await http.get(proxy.url.replace("/mcp", "/readyz"))).json()
        assert ready["upstreams"] == {"fast": "reachable", "everything": "reachable"}

        async def fast_flow(i: int) -> str:
            first = await fast.call("ask_name")
            final = await fast.retry(first, {"elicit-1": accept_name(f"f{i}")}, "ask_name")
            return str(final.result["content"][0]["text"])

        async def every_flow(i: int) -> str:
            first = await every.call("trigger-elicitation-request")
            (key,) = first.result["inputRequests"]
            final = await every.retry(first, {key: accept_name(f"e{i}")}, "trigger-elicitation-request")
            return " ".join(part.get("text", "") for part in final.result["content"])

        results = await asyncio.gather(*(fast_flow(i) for i in range(5)), *(every_flow(i) for i in range(5)))
        assert results[:5] == [f"accept:f{i}" for i in range(5)]
        assert all(f"e{i}" in text for i, text in enumerate(results[5:]))

        parked_every = await every.call("trigger-elicitation-request")  # parked while its neighbour dies
        fastmcp.peer.process.send_signal(signal.SIGKILL)
        await asyncio.wait_for(fastmcp.peer.process.wait(), 10)

        dead = await fast.call("echo", {"text": "x"})
        assert dead.error["code"] == -31001
        (key,) = parked_every.result["inputRequests"]
        survived = await every.retry(
            parked_every, {key: accept_name("Intact")}, "trigger-elicitation-request"
        )
        assert "Intact" in " ".join(part.get("text", "") for part in survived.result["content"])
        assert "Intact" in await every_flow_text(every)
        async with http.get(proxy.url.replace("/mcp", "/readyz")) as resp:
            assert resp.status == 200  # one upstream down does not take the gateway out of rotation
            assert (await resp.json())["upstreams"] == {"fast": "unreachable", "everything": "reachable"}


async def every_flow_text(client: RawClient) -> str:
    first = await client.call("trigger-elicitation-request")
    (key,) = first.result["inputRequests"]
    final = await client.retry(first, {key: accept_name("Intact")}, "trigger-elicitation-request")
    return " ".join(part.get("text", "") for part in final.result["content"])


async def test_routing_by_host(fastmcp_url: str) -> None:
    """`upstreams[].hosts`: /mcp goes to the upstream named by the Host header; other hosts, to the first."""
    fast = UpstreamConfig(name="fast", url=str(fastmcp_url), hosts=("fast.mcp.example",))
    async with (
        running_proxy(fastmcp_url, names=("first",), extra=(fast,)) as proxy,
        aiohttp.ClientSession() as http,
    ):
        client = RawClient(proxy.url, http)
        for host in ("fast.mcp.example:8443", "FAST.mcp.example", "other.example"):
            body = client.body("tools/list")
            reply = await client.send(body, {**client.headers(body), "Host": host})
            assert reply.result["resultType"] == "complete"
        metrics = await (await http.get(proxy.url.replace("/mcp", "/metrics"))).text()
    # The canonical lines (and so the metrics) name the upstream each request went to.
    assert 'mrtr_proxy_requests_total{method="tools/list",outcome="complete",upstream="fast"} 2.0' in metrics
    assert 'mrtr_proxy_requests_total{method="tools/list",outcome="complete",upstream="first"} 1.0' in metrics
