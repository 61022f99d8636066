"""SIGTERM with calls parked: readiness flips at once, new calls go elsewhere, parked calls are finished,
handed over, or cancelled upstream — never cut without an answer."""

from __future__ import annotations

import asyncio
import signal

import aiohttp
import peers
import pytest
from prometheus_client.parser import text_string_to_metric_families
from waiting import eventually

from e2e.harness import RawClient, accept_name
from e2e.replicas import log_lines, replica_set, url_of

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session")]


async def readyz(http: aiohttp.ClientSession, replica: peers.PeerProcess) -> int:
    async with http.get(f"http://127.0.0.1:{replica.port}/readyz") as resp:
        return resp.status


async def test_sigterm_finishes_parked_calls_within_the_grace(fastmcp_url: str) -> None:
    async with (
        replica_set(fastmcp_url, 1, calls={"drain_grace_s": 10}) as (replica,),
        aiohttp.ClientSession() as http,
    ):
        client = RawClient(url_of(replica), http)
        first = await client.call("ask_name")
        assert await readyz(http, replica) == 200
        replica.process.send_signal(signal.SIGTERM)

        async def out_of_rotation() -> bool:
            return await readyz(http, replica) == 503

        await eventually(out_of_rotation, "/readyz to say 503 before the replica exits")
        async with http.get(f"http://127.0.0.1:{replica.port}/metrics") as resp:  # the drain alert's input
            gauges = {
                s.name: s.value for f in text_string_to_metric_families(await resp.text()) for s in f.samples
            }
        assert gauges["mrtr_proxy_draining_seconds"] > 0
        assert gauges["mrtr_proxy_drain_grace_seconds"] == 10
        refused = await client.call("echo", {"text": "new"})
        assert refused.status == 503
        assert refused.error["code"] == -31005
        final = await client.retry(first, {"elicit-1": accept_name("Drained")}, "ask_name")
        assert final.result["content"][0]["text"] == "accept:Drained"  # the parked call still completes
        assert await asyncio.wait_for(replica.process.wait(), 10) == 0  # and then the process exits


async def test_sigterm_cancels_what_cannot_move_and_hands_over_what_can() -> None:
    async with (
        peers.start_fastmcp() as plain_url,
        peers.start_fastmcp(event_store=True) as resumable_url,
        replica_set(plain_url, 2, calls={"drain_grace_s": 0.5}) as (plain_a, plain_b),
        replica_set(resumable_url, 2, calls={"drain_grace_s": 0.5}) as (res_a, res_b),
        aiohttp.ClientSession() as http,
    ):
        stuck = await RawClient(url_of(plain_a), http).call("ask_name")
        movable = await RawClient(url_of(res_a), http).call("ask_name")
        for replica in (plain_a, res_a):
            replica.process.send_signal(signal.SIGTERM)
        for replica in (plain_a, res_a):
            assert await asyncio.wait_for(replica.process.wait(), 10) == 0

        # Not resumable: cancelled upstream (the tool got `cancel`), and the client is told it was lost.
        plain = RawClient(url_of(plain_b), http)
        lost = await plain.retry(stuck, {"elicit-1": accept_name("Late")}, "ask_name")
        assert lost.error["code"] == -31002
        assert (await plain.call("outcomes")).result["content"][0]["text"].split(",")[-1] == "cancel"
        assert any(line.get("event") == "drain.finished" for line in log_lines(plain_a))

        # Resumable: left for takeover, and another replica completes it.
        moved = await RawClient(url_of(res_b), http).retry(
            movable, {"elicit-1": accept_name("Moved")}, "ask_name"
        )
        assert moved.result["content"][0]["text"] == "accept:Moved"
        assert any(line.get("event") == "call.left_for_takeover" for line in log_lines(res_a))
