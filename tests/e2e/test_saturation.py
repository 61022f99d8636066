"""A flood from a few addresses harms no one (issue 29, item 8), on the real proxy in front of FastMCP 1.30,
the attackers' addresses given by X-Forwarded-For as a trusted ingress would (front.client_address_header).

Before: four neighbouring addresses, each within calls.max_calls_per_address, parked every call the
upstream's calls.parked_share allows; every other user's eliciting call was refused and /readyz turned 503
"saturated" — on every replica alike, so a Service routing on readiness had no endpoints left and plain
calls failed too. Now a client (an address, and its /24 or /64) may hold no more of the parking room than is
still free, the replica stays ready and says what is full, and a principal that never completed a call
keeps the short first-round TTL on every round.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import aiohttp
import pytest
import pytest_asyncio

from e2e.harness import RawClient, accept_name, running_proxy
from proxy.config import FrontConfig, PoolConfig, UpstreamConfig
from proxy.process.app import CALLS

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session")]

POOL = PoolConfig(max_sessions=16, acquire_timeout_s=0.5)  # parked_share 0.75: 12 may wait for input
PER_ADDRESS = 4  # four addresses x 4 = 16: more than the 12 the upstream may park
FRONT = FrontConfig(client_address_header="X-Forwarded-For")
USER = "192.0.2.50"


@pytest_asyncio.fixture(loop_scope="session")
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


def upstream(url: str) -> UpstreamConfig:
    return UpstreamConfig(name="default", url=url, pool=POOL)


async def call_from(
    http: aiohttp.ClientSession, url: str, address: str, principal: str, tool: str = "ask_name"
) -> dict[str, object]:
    client = RawClient(url, http, authorization=f"Bearer {principal}")
    body = client.body("tools/call", {"name": tool, "arguments": {"text": "hi"} if tool == "echo" else {}})
    reply = await client.send(body, {**client.headers(body), "X-Forwarded-For": address})
    return reply.body


async def flood(http: aiohttp.ClientSession, url: str, addresses: list[str]) -> list[dict[str, object]]:
    return list(
        await asyncio.gather(
            *(
                call_from(http, url, address, f"minted-{address}-{i}")
                for address in addresses
                for i in range(PER_ADDRESS)
            )
        )
    )


async def readyz(http: aiohttp.ClientSession, url: str) -> tuple[int, dict[str, object]]:
    async with http.get(url.replace("/mcp", "/readyz")) as resp:
        return resp.status, await resp.json()


def parked(bodies: list[dict[str, object]]) -> int:
    return sum(1 for b in bodies if "result" in b)


@pytest.mark.parametrize(
    ("addresses", "most"),
    [
        # four neighbours are one network: half the room at most
        (["10.9.8.1", "10.9.8.2", "10.9.8.3", "10.9.8.4"], 6),
        (["2001:db8:7:1::a", "2001:db8:7:1::b", "2001:db8:7:1::c", "2001:db8:7:1::d"], 6),
        # four addresses far apart: each takes at most what is left free, and room stays for a newcomer
        (["10.1.0.1", "10.2.0.1", "10.3.0.1", "10.4.0.1"], 11),
    ],
    ids=["ipv4-neighbours", "ipv6-neighbours", "far-apart"],
)
async def test_a_flood_from_four_addresses_leaves_room_for_everyone_else(
    fastmcp_url: str, http: aiohttp.ClientSession, addresses: list[str], most: int
) -> None:
    async with running_proxy(upstream(fastmcp_url), front=FRONT, max_calls_per_address=PER_ADDRESS) as proxy:
        bodies = await flood(http, proxy.url, addresses)
        assert parked(bodies) <= most, bodies
        refused = [b["error"] for b in bodies if "error" in b]
        assert all(e["code"] == -31003 for e in refused)  # type: ignore[index]
        assert any("calls.parked_share" in e["message"] for e in refused)  # type: ignore[index]
        # Another user's eliciting call still parks, and completes.
        user = RawClient(proxy.url, http, authorization="Bearer user")
        first = await user.send(
            body := user.body("tools/call", {"name": "ask_name", "arguments": {}}),
            {**user.headers(body), "X-Forwarded-For": USER},
        )
        assert first.result["resultType"] == "input_required"
        done = await user.retry(first, {"elicit-1": accept_name("Ann")}, "ask_name")
        assert done.result["content"][0]["text"] == "accept:Ann"
        # Plain calls were never at stake, and the replica stays ready.
        plain = await call_from(http, proxy.url, USER, "minted-plain", tool="echo")
        assert plain["result"]["content"][0]["text"] == "hi"  # type: ignore[index]
        status, ready = await readyz(http, proxy.url)
        assert (status, ready["status"]) == (200, "ready")


async def test_a_saturated_replica_stays_ready_and_says_what_is_full(
    fastmcp_url: str, http: aiohttp.ClientSession
) -> None:
    """Many addresses fill the room for good: the replica is saturated and says so, in /readyz's detail
    and /metrics, yet stays ready (it still serves plain calls), so a fleet of full replicas keeps its
    endpoints."""
    async with running_proxy(upstream(fastmcp_url), front=FRONT, max_calls_per_address=PER_ADDRESS) as proxy:
        bodies = await asyncio.gather(
            *(call_from(http, proxy.url, f"198.51.{i}.1", f"minted-{i}") for i in range(16))
        )
        assert parked(bodies) == 12  # one each: nobody over its fair share, the room is full
        status, ready = await readyz(http, proxy.url)
        assert (status, ready["status"], ready["saturated"]) == (200, "ready", {"default": "parked_calls"})
        async with http.get(proxy.url.replace("/mcp", "/metrics")) as resp:
            metrics = await resp.text()
        assert "mrtr_proxy_saturated 1.0" in metrics
        assert 'mrtr_proxy_saturated_by{reason="parked_calls",scope="default"} 1.0' in metrics
        plain = await call_from(http, proxy.url, "198.51.0.1", "minted-plain", tool="echo")
        assert plain["result"]["content"][0]["text"] == "hi"  # type: ignore[index]


async def test_answering_rounds_does_not_buy_a_minted_principal_the_long_ttl(
    fastmcp_url: str, http: aiohttp.ClientSession
) -> None:
    """A principal that answers round 1 of a two-question tool used to park round 2 for calls.parked_ttl_s;
    only completing a call it was asked input for earns that now."""
    async with running_proxy(
        upstream(fastmcp_url), front=FRONT, first_round_ttl_s=30, parked_ttl_s=600
    ) as proxy:
        registry = proxy.app[CALLS].registry

        def ttl_left() -> float:
            (call,) = [c for c in registry if c.parked]
            assert call.parked_until is not None
            return call.parked_until - time.monotonic()

        minted = RawClient(proxy.url, http, authorization="Bearer minted-once")
        first = await minted.call("two_questions")
        assert ttl_left() <= 30
        second = await minted.retry(first, {"elicit-1": accept_name("A")}, "two_questions")
        assert second.result["resultType"] == "input_required"
        assert ttl_left() <= 30  # round 2: still the short TTL
        color = {"action": "accept", "content": {"color": "blue"}}
        done = await minted.retry(second, {"elicit-2": color}, "two_questions")
        assert done.result["content"][0]["text"] == "accept:A|accept:blue"
        again = await minted.call("ask_name")  # it completed a call it was asked input for
        assert again.result["resultType"] == "input_required"
        assert ttl_left() > 500
