"""Adaptive gathering (proxy/calls/gathering.py) through the proxy in front of FastMCP 1.30: a tool that only
ever elicits alone is learned as such (its rounds are parked without a quiet period), while a tool that sends
elicitation + sampling + roots at once still comes out as one round — on its first call and every one after,
alone or with other calls running; and a tool learned as lone that then sends a second request without
waiting for the first one's answer is noticed, so its next call gathers both into one round."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
import pytest_asyncio

from e2e.flows import text_of
from e2e.harness import ROOTS, SAMPLED, RawClient, Reply, RunningProxy, accept_name, running_proxy
from proxy.process.app import CALLS

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session")]

BURST = {"elicitation/create", "sampling/createMessage", "roots/list"}


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def proxy(fastmcp_url: str) -> AsyncIterator[RunningProxy]:
    # The cap wide enough that a loaded machine cannot split a burst (a tool on first sight waits all of it;
    # one seen sending bursts at least a tenth: 30 ms).
    async with running_proxy(fastmcp_url, gather_window_ms=300) as running:
        yield running


@pytest_asyncio.fixture(loop_scope="session")
async def client(proxy: RunningProxy) -> AsyncIterator[RawClient]:
    async with aiohttp.ClientSession() as http:
        yield RawClient(proxy.url, http)


ACCEPT_BLUE = {"action": "accept", "content": {"color": "blue"}}
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


async def past_roots(client: RawClient, reply: Reply, name: str, arguments: dict[str, Any]) -> Reply:
    """A session whose server once asked for roots outside a call also asks the client for its roots first
    (calls/roots.py): that is a round of its own, answered here."""
    requests = reply.result.get("inputRequests", {})
    while requests and {r["method"] for r in requests.values()} == {"roots/list"}:
        reply = await client.retry(reply, {k: ROOTS for k in requests}, name, arguments)
        requests = reply.result.get("inputRequests", {})
    return reply


async def all_at_once_in_one_round(client: RawClient, prompt: str) -> None:
    args = {"prompt": prompt}
    first = await past_roots(client, await client.call("all_at_once", args), "all_at_once", args)
    requests = first.result["inputRequests"]
    # The server's three requests, sent at once, are one round.
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


async def test_a_burst_that_came_apart_is_noticed_and_gathered_on_the_next_call(
    client: RawClient, proxy: RunningProxy
) -> None:
    learner, key = proxy.app[CALLS].gathering, ("default", "ask_two_apart")
    for _ in range(2):  # learned as a tool that asks one thing at a time
        alone = {"apart_s": -1}
        final = await finish(client, await client.call("ask_two_apart", alone), "ask_two_apart", alone)
        assert text_of(final.result) == "accept:Ann"
    assert learner.quiet(key) == 0.0
    # Now it asks a second question 100 ms after the first, without waiting for the answer: parked at once,
    # the first round has only the name; the colour question arrives while the client thinks (300 ms).
    args = {"apart_s": 0.1}
    first = await past_roots(client, await client.call("ask_two_apart", args), "ask_two_apart", args)
    assert [r["params"]["message"] for r in first.result["inputRequests"].values()] == ["What is your name?"]
    await asyncio.sleep(0.3)  # the scenario: the client thinks 300 ms before answering
    (name_key,) = first.result["inputRequests"]
    second = await client.retry(first, {name_key: accept_name("Ann")}, "ask_two_apart", args)
    assert [r["params"]["message"] for r in second.result["inputRequests"].values()] == ["Favourite colour?"]
    seen = learner.arrival(key)
    assert seen is not None
    assert seen.bursts == 1  # the split was noticed when the answer came
    assert learner.quiet(key) >= 0.2  # twice what the late request may have been late by, at most the cap
    (color_key,) = second.result["inputRequests"]
    final = await client.retry(second, {color_key: ACCEPT_BLUE}, "ask_two_apart", args)
    assert text_of(final.result) == "accept:Ann|accept:blue"
    # The next call of the tool waits long enough: both questions in one round.
    first = await past_roots(client, await client.call("ask_two_apart", args), "ask_two_apart", args)
    requests = first.result["inputRequests"]
    asked = sorted(r["params"]["message"] for r in requests.values())
    assert asked == ["Favourite colour?", "What is your name?"]
    answers = {
        k: accept_name("Ann") if r["params"]["message"] == "What is your name?" else ACCEPT_BLUE
        for k, r in requests.items()
    }
    final = await client.retry(first, answers, "ask_two_apart", args)
    assert text_of(final.result) == "accept:Ann|accept:blue"
