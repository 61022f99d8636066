"""A full replica and the balancer (issue 16 item 5, issue 14's saturation signal, issue 29 item 8).

A full replica stays ready: `/readyz` is 200 with a `saturated` detail, since it still serves plain requests
and the retries of its parked calls, and when every replica is full a Service routing on readiness would
have no endpoints left (issue 29 item 8). The balancer acts on the refused call itself: a full replica
turns a new call away before anything began with HTTP 503, a `-31003` body and `Retry-After`, and with
`proxy_next_upstream http_503 non_idempotent` (docs/scale-out.md "Balancers") nginx sends it on to a
replica with room and keeps the full one out of rotation for `fail_timeout`."""

from __future__ import annotations

import asyncio
import signal

import aiohttp
import pytest
from waiting import eventually

from e2e.harness import RawClient, Reply, accept_name
from e2e.replicas import Cluster, cluster, round_robin, url_of

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session")]


async def park_full(group: Cluster, http: aiohttp.ClientSession) -> tuple[RawClient, list[Reply]]:
    filler = RawClient(url_of(group.replicas[0]), http)
    parked = [await filler.call("ask_name") for _ in range(2)]
    assert all(p.result["resultType"] == "input_required" for p in parked)
    return filler, parked


FULL = [{"max_parked": 2, "max_parked_per_principal": 2}, {}]


async def test_a_full_replica_stays_ready_and_says_it_is_full(fastmcp_url: str) -> None:
    """What a Kubernetes Service acts on: the full replica's /readyz is 200 with `saturated`, the other's
    200 without; the full one still answers plain requests and its own parked calls are undisturbed."""
    async with cluster(fastmcp_url, 2, calls_per_replica=FULL) as group, aiohttp.ClientSession() as http:
        full, roomy = group.replicas
        filler, parked = await park_full(group, http)
        async with http.get(f"http://127.0.0.1:{full.port}/readyz") as resp:
            body = await resp.json()
            assert (resp.status, body["status"], body["saturated"]) == (200, "ready", {"replica": "calls"})
        async with http.get(f"http://127.0.0.1:{roomy.port}/readyz") as resp:
            assert resp.status == 200
            assert "saturated" not in await resp.json()
        assert "tools" in (await filler.request("tools/list")).result
        for i, first in enumerate(parked):
            final = await filler.retry(first, {"elicit-1": accept_name(f"p{i}")}, "ask_name")
            assert final.result["content"][0]["text"] == f"accept:p{i}"
        async with http.get(f"http://127.0.0.1:{full.port}/readyz") as resp:
            assert resp.status == 200
            assert "saturated" not in await resp.json()  # room again


FULL_MESSAGE = "Too many calls: the proxy holds 2 parked or running calls (calls.max_parked)"


async def test_a_full_replica_refuses_a_new_call_with_503_before_anything_began(fastmcp_url: str) -> None:
    """Straight to the full replica: 503, the -31003 body, Retry-After; its parked calls are untouched."""
    async with cluster(fastmcp_url, 2, calls_per_replica=FULL) as group, aiohttp.ClientSession() as http:
        filler, parked = await park_full(group, http)
        refused = await filler.call("ask_name")
        assert refused.status == 503
        assert refused.error == {"code": -31003, "message": FULL_MESSAGE}
        assert refused.headers["Retry-After"] == "1"
        final = await filler.retry(parked[0], {"elicit-1": accept_name("Kept")}, "ask_name")
        assert final.result["content"][0]["text"] == "accept:Kept"


async def test_a_full_replica_leaves_nginx_rotation(fastmcp_url: str) -> None:
    """Behind nginx with the documented settings no client sees the full replica: each new call it turns
    away goes on to the other, and every flow completes there."""
    async with cluster(fastmcp_url, 2, calls_per_replica=FULL) as group, aiohttp.ClientSession() as http:
        await park_full(group, http)
        async with round_robin(group.replicas, next_upstream=True) as lb:
            client = RawClient(lb, http)
            firsts = [await client.call("ask_name") for _ in range(6)]
            assert [(f.status, f.result["resultType"]) for f in firsts] == [(200, "input_required")] * 6
            for i, first in enumerate(firsts):
                final = await client.retry(first, {"elicit-1": accept_name(f"n{i}")}, "ask_name")
                assert final.result["content"][0]["text"] == f"accept:n{i}"


async def test_when_every_replica_is_full_the_client_gets_503_with_retry_after(fastmcp_url: str) -> None:
    both_full = [FULL[0], FULL[0]]
    async with cluster(fastmcp_url, 2, calls_per_replica=both_full) as group, aiohttp.ClientSession() as http:
        for replica in group.replicas:
            filler = RawClient(url_of(replica), http)
            assert [(await filler.call("ask_name")).result["resultType"] for _ in range(2)] == [
                "input_required"
            ] * 2
        async with round_robin(group.replicas, next_upstream=True) as lb:
            refused = await RawClient(lb, http).call("ask_name")
            listed = await RawClient(lb, http).request("tools/list")
        assert refused.status == 503
        assert refused.error == {"code": -31003, "message": FULL_MESSAGE}
        assert refused.headers["Retry-After"] == "1"
        # Every replica is full, and every one is still ready: a readiness-driven Service keeps its
        # endpoints, and plain requests still work.
        assert "tools" in listed.result
        for replica in group.replicas:
            async with http.get(f"http://127.0.0.1:{replica.port}/readyz") as resp:
                assert resp.status == 200
                assert (await resp.json())["saturated"] == {"replica": "calls"}


async def test_nginx_settings_make_a_drain_invisible_to_clients(fastmcp_url: str) -> None:
    """A draining replica refuses new calls with 503 (-31005); with the documented nginx settings the
    balancer sends each to the next replica: no client sees the drain."""
    async with (
        cluster(fastmcp_url, 2, calls={"drain_grace_s": 20}) as group,
        aiohttp.ClientSession() as http,
    ):
        draining, _ = group.replicas
        owner = RawClient(url_of(draining), http)
        parked = await owner.call("ask_name")  # keeps it draining (not exited) while new calls arrive
        draining.process.send_signal(signal.SIGTERM)

        async def out_of_rotation() -> bool:
            async with http.get(f"http://127.0.0.1:{draining.port}/readyz") as resp:
                return resp.status == 503

        await eventually(out_of_rotation, "the draining replica's /readyz to say 503")
        async with round_robin(group.replicas, next_upstream=True) as lb:
            client = RawClient(lb, http)
            replies = [await client.call("echo", {"text": f"t{i}"}) for i in range(6)]
        assert [r.status for r in replies] == [200] * 6
        assert [r.result["content"][0]["text"] for r in replies] == [f"t{i}" for i in range(6)]
        final = await owner.retry(parked, {"elicit-1": accept_name("Done")}, "ask_name")
        assert final.result["content"][0]["text"] == "accept:Done"  # its parked call still completes
        assert await asyncio.wait_for(draining.process.wait(), 30) == 0
