"""Legacy `initialize` flood (issue 14, finding 2), on the real proxy in front of FastMCP 1.30.

Each legacy `initialize` to a bridged upstream starts a child process (stdio) or an upstream stream (sse);
relayed to a Streamable HTTP upstream it opens an upstream session. The attack sends many at once, under
one principal and under freshly minted ones: the per-principal and per-address shares hold, the children
that exist are exactly the sessions granted, closing one frees its room, and the legacy relay counts
against the per-principal request rate like every other request.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import aiohttp
import peers
import pytest
import pytest_asyncio

from e2e.harness import running_proxy
from e2e.test_legacy_bridge import Legacy, fastmcp_stdio
from e2e.test_transport_stdio import stdio_children
from proxy.config import FrontConfig, PoolConfig, UpstreamConfig

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session")]

FRONT = FrontConfig(legacy_sessions_per_principal=2, legacy_sessions_per_address=5)


@pytest.fixture(autouse=True, scope="module")
def _no_stdio_children_left() -> Iterator[None]:
    yield
    assert stdio_children() == [], "a bridged stdio child outlived its proxy"


@pytest_asyncio.fixture(loop_scope="session")
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=90)) as session:
        yield session


INIT: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "f", "version": "1"},
    },
}


async def initialize(client: Legacy) -> tuple[int, dict[str, Any]]:
    """One raw legacy initialize: (HTTP status, the JSON-RPC answer)."""
    status, messages = await client.post(INIT)
    return status, messages[-1]


async def flood(url: str, http: aiohttp.ClientSession, principals: list[str]) -> list[dict[str, Any]]:
    answers = await asyncio.gather(*(initialize(Legacy(url, http, authorization=p)) for p in principals))
    assert all(status == 200 for status, _ in answers), answers
    return [answer for _, answer in answers]


def refused(answers: list[dict[str, Any]]) -> list[str]:
    out = []
    for answer in answers:
        if "error" in answer:
            assert answer["error"]["code"] == -31003, answer
            out.append(answer["error"]["message"])
    return out


PER_PRINCIPAL = (
    "Too many calls: this client holds 2 legacy sessions (front.legacy_sessions_per_principal); "
    "close some (DELETE) first"
)
PER_ADDRESS = (
    "Too many calls: this client address holds 5 legacy sessions (front.legacy_sessions_per_address); "
    "close some (DELETE) first"
)


async def test_stdio_children_are_capped_per_principal_and_per_address(http: aiohttp.ClientSession) -> None:
    tag = "legacy-flood"
    async with running_proxy(fastmcp_stdio(tag, max_sessions=50), front=FRONT) as proxy:
        # One principal, ten initializes at once: two children, eight -31003.
        answers = await flood(proxy.url, http, ["Bearer mallory"] * 10)
        assert refused(answers) == [PER_PRINCIPAL] * 8
        assert len(stdio_children(tag)) == 2
        # Minted principals from one address: five children in all, whatever the principals.
        answers = await flood(proxy.url, http, [f"Bearer minted-{i}" for i in range(10)])
        assert refused(answers) == [PER_ADDRESS] * 7
        assert len(stdio_children(tag)) == 5

    assert stdio_children(tag) == []


async def test_sse_upstream_streams_are_capped_too(http: aiohttp.ClientSession) -> None:
    async with peers.start_fastmcp("sse") as sse_url:
        upstream = UpstreamConfig(
            name="default", url=sse_url, transport="sse", pool=PoolConfig(max_sessions=50)
        )
        async with running_proxy(upstream, front=FRONT) as proxy:
            answers = await flood(proxy.url, http, ["Bearer mallory"] * 6)
            assert refused(answers) == [PER_PRINCIPAL] * 4


async def test_relayed_sessions_are_capped_and_a_delete_frees_one(
    fastmcp_url: str, http: aiohttp.ClientSession
) -> None:
    async with running_proxy(fastmcp_url, front=FRONT) as proxy:
        answers = await flood(proxy.url, http, ["Bearer mallory"] * 6)
        assert refused(answers) == [PER_PRINCIPAL] * 4
        # A client that ends its session (DELETE) may open another.
        client = Legacy(proxy.url, http, authorization="Bearer bob")
        await client.initialize()
        second = Legacy(proxy.url, http, authorization="Bearer bob")
        await second.initialize()
        assert refused([(await initialize(Legacy(proxy.url, http, authorization="Bearer bob")))[1]]) == [
            PER_PRINCIPAL
        ]
        async with http.delete(proxy.url, headers=client.headers()) as r:
            assert r.status == 200
        await Legacy(proxy.url, http, authorization="Bearer bob").initialize()


async def test_the_legacy_relay_counts_against_the_request_rate(
    fastmcp_url: str, http: aiohttp.ClientSession
) -> None:
    front = FrontConfig(rate_limit_per_s=0.01, rate_burst=3)
    async with running_proxy(fastmcp_url, front=front) as proxy:
        client = Legacy(proxy.url, http, authorization="Bearer eve")
        await client.initialize()  # initialize + notifications/initialized: 2 of the burst of 3
        status, messages = await client.request("tools/list")
        assert status == 200 and "tools" in messages[-1]["result"]
        status, messages = await client.request("tools/list")
        assert status == 429
        assert messages[-1]["error"]["code"] == -31003
        assert messages[-1]["error"]["message"].startswith(
            "Too many requests: at most 0.01/s for this client"
        )
