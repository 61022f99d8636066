"""Adaptive gathering (proxy/calls/gathering.py) through the proxy in front of FastMCP 1.30: a tool that only
ever elicits alone is learned as such (its rounds are parked without a quiet period), while a tool that sends
elicitation + sampling + roots at once still comes out as one round — on its first call and every one after,
alone or with other calls running."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
import pytest_asyncio

from e2e.flows import text_of
from e2e.harness import ROOTS, SAMPLED, RawClient, Reply, RunningProxy, accept_name, running_proxy
from proxy.app import CALLS

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session")]

BURST = {"elicitation/create", "sampling/createMessage", "roots/list"}


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def proxy(fastmcp_url: str) -> AsyncIterator[RunningProxy]:
    # The cap wide enough that a loaded machine cannot split a burst on first sight (a tenth of it: 30 ms).
    async with running_proxy(fastmcp_url, gather_window_ms=300) as running:
        yield running


@pytest_asyncio.fixture(loop_scope="session")
async def client(proxy: RunningProxy) -> AsyncIterator[RawClient]:
    async with aiohttp.ClientSession() as http:
        yield RawClient(proxy.url, http)


ANSWERS = {"elicitation/create": accept_name("Ann"), "sampling/createMessage": SAMPLED, "roots/list": ROOTS}


async def finish(
    client: RawClient, first: Reply, name: str, arguments: dict[str, Any] | None = None
) -> Reply:
    """Answer every round (each input request by its method) until the call completes."""
    reply = first
    for _ in range(5):
        if reply.result["resultType"] == "complete":
            return reply
        requests = reply.result["inputRequests"]
        answers = {k: ANSWERS[r["method"]] for k, r in requests.items()}
        reply = await client.retry(reply, answers, name, arguments)
    raise AssertionError(f"{name} did not complete in 5 rounds")


async def all_at_once_in_one_round(client: RawClient, prompt: str) -> None:
    first = await client.call("all_at_once", {"prompt": prompt})
    requests = first.result["inputRequests"]
    # The server's three requests, sent at once, are one round (a session whose server once asked for roots
    # outside a call also asks the client for its roots first: calls/roots.py; that is a round of its own).
    while {r["method"] for r in requests.values()} == {"roots/list"}:
        first = await client.retry(first, {k: ROOTS for k in requests}, "all_at_once", {"prompt": prompt})
        requests = first.result["inputRequests"]
    assert {r["method"] for r in requests.values()} == BURST, requests
    final = await finish(client, first, "all_at_once", {"prompt": prompt})
    assert text_of(final.result) == "elicit=accept:Ann;sample=Paris;roots=file:///work/project"


async def ask_name_once(client: RawClient) -> None:
    final = await finish(client, await client.call("ask_name"), "ask_name")
    assert text_of(final.result) == "accept:Ann"


async def test_the_first_call_of_a_burst_tool_is_one_round(client: RawClient, proxy: RunningProxy) -> None:
    learner = proxy.app[CALLS].gathering
    assert learner.arrival(("default", "all_at_once")) is None  # never seen on this replica
    await all_at_once_in_one_round(client, "first")
    seen = learner.arrival(("default", "all_at_once"))
    assert seen is not None
    assert seen.bursts == 1


async def test_a_lone_elicitation_is_learned_and_parked_without_a_quiet_period(
    client: RawClient, proxy: RunningProxy
) -> None:
    learner = proxy.app[CALLS].gathering
    for _ in range(3):
        await ask_name_once(client)
    seen = learner.arrival(("default", "ask_name"))
    assert seen is not None
    assert seen.lone >= 3
    assert seen.bursts == 0
    assert learner.quiet(("default", "ask_name")) == 0.0


async def test_a_burst_tool_stays_one_round_next_to_lone_ones(client: RawClient, proxy: RunningProxy) -> None:
    async with asyncio.timeout(60):
        await asyncio.gather(
            *(all_at_once_in_one_round(client, f"p{i}") for i in range(4)),
            *(ask_name_once(client) for _ in range(4)),
        )
    learner = proxy.app[CALLS].gathering
    assert learner.quiet(("default", "all_at_once")) >= learner.cap / 10  # never more eager than before
    for i in range(3):
        await all_at_once_in_one_round(client, f"again{i}")
