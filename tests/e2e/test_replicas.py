"""Several replicas behind a stateless round-robin balancer (nginx): any replica takes any retry; a dead
replica loses nothing it could have kept, and never re-runs a tool."""

from __future__ import annotations

import asyncio
import collections
import signal

import aiohttp
import peers
import pytest

from e2e.harness import ROOTS, RawClient, accept_name
from e2e.replicas import log_lines, replica_set, round_robin, url_of

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session")]

FLOWS = 200
CONCURRENCY = 20


async def one_flow(client: RawClient, i: int) -> str:
    rounds = 1 + i % 3
    args = {"n": rounds}
    reply = await client.call("ask_n", args)
    for r in range(rounds):
        assert reply.result["resultType"] == "input_required", reply.body
        (key,) = reply.result["inputRequests"]
        reply = await client.retry(reply, {key: accept_name(f"u{i}r{r}")}, "ask_n", args)
    assert reply.result["resultType"] == "complete", reply.body
    return str(reply.result["content"][0]["text"])


async def test_200_flows_through_a_round_robin_balancer(fastmcp_url: str) -> None:
    async with replica_set(fastmcp_url, 3) as replicas, round_robin(replicas) as lb:
        limit = asyncio.Semaphore(CONCURRENCY)
        async with aiohttp.ClientSession() as http:
            client = RawClient(lb, http)

            async def flow(i: int) -> str:
                async with limit:
                    return await one_flow(client, i)

            results = await asyncio.gather(*(flow(i) for i in range(FLOWS)))
        for i, text in enumerate(results):
            assert text == "|".join(f"accept:u{i}r{r}" for r in range(1 + i % 3))
        outcomes = await tally(replicas)
        print(dict(outcomes))
        assert outcomes["forwarded"] > 0  # retries that landed on a non-owner went to the owner
        assert outcomes["served_for_a_peer"] == outcomes["forwarded"]
        assert outcomes["complete"] == FLOWS


async def tally(replicas: list[peers.PeerProcess]) -> collections.Counter[str]:
    """Outcomes of the canonical request lines of all replicas, once every line has been written."""
    previous: collections.Counter[str] | None = None
    for _ in range(20):  # bounded: the last lines are written just after their responses
        outcomes: collections.Counter[str] = collections.Counter()
        for replica in replicas:
            for line in log_lines(replica):
                if line.get("event") == "request":
                    outcomes[str(line.get("outcome", "")).split(":")[0]] += 1
                    if line.get("forwarded_by"):
                        outcomes["served_for_a_peer"] += 1
        if outcomes == previous:
            break
        previous = outcomes
        await asyncio.sleep(0.2)
    return outcomes


async def park_on(
    replica: peers.PeerProcess, http: aiohttp.ClientSession, tool: str
) -> tuple[RawClient, object]:
    client = RawClient(url_of(replica), http)
    first = await client.call(tool)
    requests = first.result.get("inputRequests", {})
    if requests and {r["method"] for r in requests.values()} == {"roots/list"}:
        # server-everything asks roots at start-up: the session's first call asks them first, before the
        # call is sent upstream (calls/roots.py); answered, the call goes up and asks its own question
        first = await client.retry(first, dict.fromkeys(requests, ROOTS), tool)
    assert first.result["resultType"] == "input_required", first.body
    return client, first


@pytest.mark.parametrize("upstream", ["server-everything", "fastmcp-event-store"])
async def test_owner_killed_resumable_upstream_completes_elsewhere(upstream: str) -> None:
    starter = (
        peers.start_server_everything()
        if upstream == "server-everything"
        else peers.start_fastmcp(event_store=True)
    )
    tool = "trigger-elicitation-request" if upstream == "server-everything" else "ask_name"
    async with starter as url, replica_set(url, 2) as (owner, other), aiohttp.ClientSession() as http:
        _, first = await park_on(owner, http, tool)
        owner.process.send_signal(signal.SIGKILL)
        await asyncio.wait_for(owner.process.wait(), 10)
        survivor = RawClient(url_of(other), http)
        (key,) = first.result["inputRequests"]  # type: ignore[attr-defined]
        final = await survivor.retry(first, {key: accept_name("Rescued")}, tool)  # type: ignore[arg-type]
        # server-everything's example event store replays every stream: the taken-over call may ask for
        # roots too. A client just answers it.
        for _ in range(3):
            if final.result.get("resultType") != "input_required":
                break
            answers = {
                k: ROOTS for k, r in final.result["inputRequests"].items() if r["method"] == "roots/list"
            }
            final = await survivor.retry(final, answers, tool)
        assert final.status == 200, (final.status, other.log_text())
        assert final.result["resultType"] == "complete", final.body
        assert "Rescued" in " ".join(part.get("text", "") for part in final.result["content"])
        events = [line for line in log_lines(other) if line.get("event") == "call.taken_over"]
        assert len(events) == 1


async def test_owner_killed_without_resumability_is_lost_not_rerun() -> None:
    async with (
        peers.start_fastmcp() as url,
        replica_set(url, 2) as (owner, other),
        aiohttp.ClientSession() as http,
    ):
        survivor = RawClient(url_of(other), http)
        before = int((await survivor.call("side_effects")).result["content"][0]["text"])
        _, first = await park_on(owner, http, "count_then_ask")
        owner.process.send_signal(signal.SIGKILL)
        await asyncio.wait_for(owner.process.wait(), 10)
        lost = await survivor.retry(first, {"elicit-1": accept_name("Late")}, "count_then_ask")  # type: ignore[arg-type]
        assert lost.error["code"] == -31002
        assert "not re-run" in lost.error["message"]
        after = int((await survivor.call("side_effects")).result["content"][0]["text"])
        assert after == before + 1  # the tool ran exactly once
