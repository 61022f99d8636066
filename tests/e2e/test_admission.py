"""Fair admission against a park flood (issue 14, finding 1), on the real proxy in front of FastMCP 1.30.

The attack: many `tools/call`s of an eliciting tool, each under a freshly minted principal (a new
`Authorization` value each), so every call parks and holds an upstream session. The caps are small here
(a pool of 8 sessions) so that the flood takes a second, not 1,000 parks; the mechanism is the same.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
from waiting import eventually

from e2e.harness import ALL_CAPS, RawClient, accept_name, running_proxy
from proxy.config import PoolConfig, TasksConfig, UpstreamConfig
from proxy.process.app import CALLS

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session")]

POOL = PoolConfig(max_sessions=8, acquire_timeout_s=0.5)  # parked_share 0.75: 6 may wait for input
FLOOD = 24
BOUND_S = 20.0
TASKS_EXT = "io.modelcontextprotocol/tasks"


@pytest_asyncio.fixture(loop_scope="session")
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


def upstream(url: str, pool: PoolConfig = POOL) -> UpstreamConfig:
    return UpstreamConfig(name="default", url=url, pool=pool)


async def readyz(http: aiohttp.ClientSession, proxy_url: str) -> tuple[int, dict[str, object]]:
    async with http.get(proxy_url.replace("/mcp", "/readyz")) as r:
        return r.status, await r.json()


async def metrics(http: aiohttp.ClientSession, proxy_url: str) -> dict[str, float]:
    async with http.get(proxy_url.replace("/mcp", "/metrics")) as r:
        text = await r.text()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            sample, _, value = line.rpartition(" ")
            out[sample] = float(value)
    return out


async def flood(proxy_url: str, http: aiohttp.ClientSession, count: int) -> list[dict[str, object]]:
    attackers = [RawClient(proxy_url, http, authorization=f"Bearer attacker-{i}") for i in range(count)]
    replies = await asyncio.gather(*(a.call("ask_name") for a in attackers))
    return [r.body for r in replies]


async def test_a_flood_of_minted_principals_leaves_other_users_working(
    fastmcp_url: str, http: aiohttp.ClientSession
) -> None:
    async with running_proxy(upstream(fastmcp_url), max_calls_per_address=0) as proxy:
        bodies = await flood(proxy.url, http, FLOOD)
        parked = [b for b in bodies if b.get("result", {}).get("resultType") == "input_required"]  # type: ignore[union-attr]
        refused = [b["error"] for b in bodies if "error" in b]
        assert len(parked) == 6 and len(refused) == FLOOD - 6, bodies
        for error in refused:
            assert error["code"] == -31003  # type: ignore[index]
            assert str(error["message"]).startswith("Too many calls: ")  # type: ignore[index]
        assert proxy.parked == 6

        # Another user's calls that do not ask for input still get a session and complete.
        alice = RawClient(proxy.url, http, authorization="Bearer alice")
        assert (await alice.call("echo", {"text": "hi"})).result["content"][0]["text"] == "hi"
        assert "tools" in (await alice.request("tools/list")).result

        # The replica says it is full, in its readiness detail and its metrics, and stays ready: it still
        # serves alice's plain calls (issue 29 item 8: a full fleet must not lose its endpoints).
        status, body = await readyz(http, proxy.url)
        assert status == 200
        assert body["status"] == "ready"
        assert body["saturated"] == {"default": "parked_calls"}
        assert body["parked_calls"] == 6 and body["upstreams"] == {"default": "reachable"}
        seen = await metrics(http, proxy.url)
        assert seen["mrtr_proxy_saturated"] == 1
        assert seen['mrtr_proxy_saturated_by{reason="parked_calls",scope="default"}'] == 1
        assert seen['mrtr_proxy_admission_refusals_total{reason="parked_share"}'] >= 1
        assert (
            seen['mrtr_proxy_admission_refusals_total{reason="parked_share"}']
            + seen['mrtr_proxy_admission_refusals_total{reason="pool_full"}']
            == FLOOD - 6
        )


async def test_parked_calls_of_principals_that_never_answered_die_young(
    fastmcp_url: str, http: aiohttp.ClientSession
) -> None:
    async with running_proxy(
        upstream(fastmcp_url), max_calls_per_address=0, first_round_ttl_s=1, parked_ttl_s=600
    ) as proxy:
        # alice completes a round: from now on her calls park for the full calls.parked_ttl_s.
        alice = RawClient(proxy.url, http, authorization="Bearer alice")
        first = await alice.call("ask_name")
        assert (await alice.retry(first, {"elicit-1": accept_name()}, "ask_name")).result
        kept = await alice.call("ask_name")
        assert kept.result["resultType"] == "input_required"

        await flood(proxy.url, http, 5)
        assert proxy.parked == 6
        # The reaper ends the attackers' parks after ~1 s.
        await eventually(lambda: proxy.parked <= 1, "the reaper to end the attackers' parks", BOUND_S)
        assert (await readyz(http, proxy.url))[0] == 200
        done = await alice.retry(kept, {"elicit-1": accept_name("Al")}, "ask_name")
        assert done.result["content"][0]["text"] == "accept:Al"
        assert [c for c in proxy.app[CALLS].registry] == []


async def test_one_client_address_gets_only_its_share(fastmcp_url: str, http: aiohttp.ClientSession) -> None:
    async with running_proxy(upstream(fastmcp_url), max_calls_per_address=3) as proxy:
        bodies = await flood(proxy.url, http, 5)
        assert sum(1 for b in bodies if "result" in b) == 3
        errors = [b["error"] for b in bodies if "error" in b]
        assert (
            errors
            == [
                {
                    "code": -31003,
                    "message": "Too many calls: this client address holds 3 parked or running calls "
                    "(calls.max_calls_per_address); finish or abandon some first",
                }
            ]
            * 2
        )
        seen = await metrics(http, proxy.url)
        assert seen['mrtr_proxy_admission_refusals_total{reason="address_share"}'] == 2


async def test_a_full_pool_answers_every_request_with_31003_never_a_500(
    fastmcp_url: str, http: aiohttp.ClientSession
) -> None:
    """Issue 20 item 1: three principals listing tools with pool.max_sessions 2 (and both sessions held
    by calls waiting for input): the third waits pool.acquire_timeout_s, then gets -31003."""
    pool = replace(POOL, max_sessions=2)
    async with running_proxy(upstream(fastmcp_url, pool), max_calls_per_address=0, parked_share=1.0) as proxy:
        holders = [RawClient(proxy.url, http, authorization=f"Bearer holder-{i}") for i in range(2)]
        for h in holders:
            assert (await h.call("ask_name")).result["resultType"] == "input_required"
        carol = RawClient(proxy.url, http, authorization="Bearer carol")
        # (discover too: in pass-through mode only the upstream may judge a client's credentials, so
        # even a cached initialize result needs a session of the client's own)
        for method in ("tools/list", "prompts/list", "resources/list", "server/discover"):
            reply = await carol.request(method)
            assert reply.status == 200, method
            assert reply.error["code"] == -31003, method
            assert reply.error["message"] == (
                "Too many calls: upstream 'default' has 2 sessions open (pool.max_sessions); "
                "waited 0.5s (pool.acquire_timeout_s)"
            )
        assert (await carol.request("ping")).result == {"resultType": "complete"}  # answered here
        status, body = await readyz(http, proxy.url)
        assert (status, body["status"], body["saturated"]) == (200, "ready", {"default": "parked_calls"})
        seen = await metrics(http, proxy.url)
        assert seen['mrtr_proxy_admission_refusals_total{reason="pool_full"}'] == 4
        assert seen['mrtr_proxy_requests_total{method="tools/list",outcome="failed",upstream="default"}'] == 1


async def test_a_task_of_a_principal_that_never_answered_dies_young_too(
    fastmcp_url: str, http: aiohttp.ClientSession
) -> None:
    """With the Tasks extension a parked call used to live for the task's TTL (1 h): now it gets
    calls.first_round_ttl_s like any other, and the task says nobody answered."""
    tasks = TasksConfig(policy="always", poll_interval_ms=50)
    async with running_proxy(
        upstream(fastmcp_url), max_calls_per_address=0, first_round_ttl_s=1, tasks=tasks
    ) as proxy:
        client = RawClient(proxy.url, http, capabilities={**ALL_CAPS, "extensions": {TASKS_EXT: {}}})
        client.authorization = "Bearer minted-task"
        task_id = (await client.call("ask_name")).result["taskId"]

        async def ended() -> dict[str, Any] | None:
            task: dict[str, Any] = (await client.request("tasks/get", {"taskId": task_id})).result
            return task if task["status"] not in ("working", "input_required") else None

        task = await eventually(ended, "the task to end", BOUND_S)
        assert task["status"] == "failed"
        assert task["error"] == {
            "code": -31002,
            "message": "Nobody answered the task's input requests in time",
        }
        assert proxy.parked == 0 and proxy.live == 0
