"""Keep-alive to the upstream (issue 18): after a warm-up, hundreds of calls through the proxy open (almost)
no new TCP connection to the legacy server — plain calls and MRTR rounds (the answer POSTed upstream) alike,
over Streamable HTTP (replies as SSE, which FastMCP 1.30 closes right after the response) and over HTTP+SSE
(every POST answered 202 "Accepted"); and at 64 concurrent clients after a warm-up at 8 (issue 31): the pool
grows to one session per call in flight, each with its own GET stream, and no further than that; once grown,
its sessions and connections are reused.

Connections are counted from the kernel's socket table (/proc/net/tcp): every socket between an ephemeral
port and the upstream's port, open or in TIME_WAIT (which lasts a minute on Linux), by its ephemeral port.
A connection the proxy reuses keeps its port; every new one adds a port.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
import pytest_asyncio
from yarl import URL

from e2e.flows import text_of
from e2e.harness import ROOTS, RawClient, Reply, RunningProxy, accept_name, running_proxy
from proxy.process.appstate import POOLS

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session")]

CLIENTS = 8
CALLS = 320
ALLOWED_NEW = 2  # 0 once warm (6-29 before the fix); the goal is ≤ 5 per 1,000 calls


def upstream_client_ports(port: int) -> set[int]:
    """The ephemeral ports of every IPv4 socket to or from `port` on loopback (any state)."""
    ports = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, remote = (int(addr.rsplit(":", 1)[1], 16) for addr in fields[1:3])
        if remote == port and local != port:
            ports.add(local)
        elif local == port and remote not in (0, port):
            ports.add(remote)
    return ports


async def answer_all(client: RawClient, reply: Reply) -> Reply:
    """Answer each round of `ask_name` (its elicitation; roots, when the session's server asked for them
    outside a call: calls/roots.py) until it completes."""
    for _ in range(4):
        if reply.result["resultType"] == "complete":
            return reply
        requests = reply.result["inputRequests"]
        answers = {k: ROOTS if r["method"] == "roots/list" else accept_name() for k, r in requests.items()}
        reply = await client.retry(reply, answers, "ask_name")
    raise AssertionError("ask_name did not complete in 4 rounds")


async def run_calls(client: RawClient, count: int, *, mrtr_every: int = 0, clients: int = CLIENTS) -> None:
    """`count` calls from CLIENTS concurrent clients: `echo`, and every `mrtr_every`-th one an elicitation
    answered at once (two client requests, the answer POSTed upstream)."""
    numbers = iter(range(count))

    async def worker() -> None:
        for n in numbers:
            if mrtr_every and n % mrtr_every == 0:
                final = await answer_all(client, await client.call("ask_name"))
                assert text_of(final.result) == "accept:Alice"
            else:
                reply = await client.call("echo", {"text": f"hi {n}"})
                assert text_of(reply.result) == f"hi {n}"

    async with asyncio.timeout(120):
        await asyncio.gather(*(worker() for _ in range(clients)))


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def streamable(fastmcp_url: str) -> AsyncIterator[RunningProxy]:
    async with running_proxy(fastmcp_url) as running:
        yield running


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def http_sse(fastmcp_sse_url: str) -> AsyncIterator[RunningProxy]:
    async with running_proxy(fastmcp_sse_url, transport="sse") as running:
        yield running


async def warm_up(client: RawClient, *, mrtr_every: int) -> None:
    """As many upstream sessions as there are clients (CLIENTS calls parked at once, each holding one), then
    calls of the measured kind, so the pool of sessions and of connections has reached its size."""
    async with asyncio.timeout(60):
        firsts = await asyncio.gather(*(client.call("ask_name") for _ in range(CLIENTS)))
        await asyncio.gather(
            *(
                client.retry(f, {k: accept_name()}, "ask_name")
                for f in firsts
                for k in f.result["inputRequests"]
            )
        )
    await run_calls(client, 8 * CLIENTS, mrtr_every=mrtr_every)


async def measure_new_connections(proxy: RunningProxy, upstream_url: str, *, mrtr_every: int) -> int:
    port = URL(upstream_url).port
    assert port is not None
    async with aiohttp.ClientSession() as http:
        client = RawClient(proxy.url, http)
        await warm_up(client, mrtr_every=mrtr_every)
        before = upstream_client_ports(port)
        await run_calls(client, CALLS, mrtr_every=mrtr_every)
        after = upstream_client_ports(port)
    return len(after - before)


async def test_streamable_http_calls_reuse_upstream_connections(
    streamable: RunningProxy, fastmcp_url: str
) -> None:
    new = await measure_new_connections(streamable, fastmcp_url, mrtr_every=0)
    assert new <= ALLOWED_NEW, f"{new} new upstream connections for {CALLS} plain calls"


async def test_streamable_http_mrtr_rounds_reuse_upstream_connections(
    streamable: RunningProxy, fastmcp_url: str
) -> None:
    new = await measure_new_connections(streamable, fastmcp_url, mrtr_every=4)
    assert new <= ALLOWED_NEW, f"{new} new upstream connections for {CALLS} calls, a quarter of them MRTR"


async def test_http_sse_calls_reuse_upstream_connections(
    http_sse: RunningProxy, fastmcp_sse_url: str
) -> None:
    new = await measure_new_connections(http_sse, fastmcp_sse_url, mrtr_every=4)
    assert new <= ALLOWED_NEW, f"{new} new upstream connections for {CALLS} calls over HTTP+SSE"


MANY = 64


async def test_sixty_four_clients_after_a_warm_up_at_eight_reuse_what_they_grew(fastmcp_url: str) -> None:
    """The first 64-client cell of `make bench` opened dozens of upstream connections in its window: the pool
    growing from the sessions a warm-up at 8 left to one per call in flight, against a server that takes
    long to open them. Growing costs each new session its GET stream and POST connections for the calls in
    flight; once grown, 64 clients open (almost) nothing."""
    port = URL(fastmcp_url).port
    assert port is not None
    async with running_proxy(fastmcp_url) as proxy, aiohttp.ClientSession() as http:
        client = RawClient(proxy.url, http)
        pool = proxy.app[POOLS]["default"]
        await run_calls(client, 8 * CLIENTS)
        warm = pool.size
        assert warm <= CLIENTS
        before = upstream_client_ports(port)
        await run_calls(client, 2 * MANY, clients=MANY)  # every client's first call, and one more
        grown = pool.size - warm
        opened = len(upstream_client_ports(port) - before)
        assert pool.size <= MANY, f"{pool.size} sessions for {MANY} calls in flight"
        assert opened <= grown + 2 * MANY, f"{opened} new upstream connections to grow by {grown} sessions"
        before = upstream_client_ports(port)
        await run_calls(client, 10 * MANY, clients=MANY)
        new = len(upstream_client_ports(port) - before)
    # Not quite 0 on a busy machine: FastMCP ends a call's SSE reply a moment after its response; a call's
    # answer waits for that end (streamable_http.py), but for 0.25 s at most, and a client's next call that
    # starts before a later end needs another connection (uvicorn closes one idle for 5 s). Before the answer
    # waited, every such overlap grew the pool: 0-21 new per window at 64 clients, 80-90 POST connections for
    # 64 calls in flight. A connection per call, or per session and round, would be hundreds.
    assert new <= MANY // 8, f"{new} new upstream connections for {10 * MANY} calls from {MANY} clients"
