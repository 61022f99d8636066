"""Issue 14, finding 6 (the parts about calls): a finished call's handle stays refused after the bounded
"ended" memory forgot the call, and a mistyped answer inside an elicitation's content keeps the call
parked with -32602 naming the key — both against the real proxy in front of FastMCP 1.30."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest
import pytest_asyncio

from e2e.harness import RawClient, accept_name, running_proxy
from proxy.calls.registry import ENDED_PER_CALL
from proxy.process.app import CALLS, CODEC

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session")]

INVALID = {"code": -32602, "message": "Invalid requestState"}


@pytest_asyncio.fixture(loop_scope="session")
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


async def test_a_finished_calls_handle_is_refused_after_the_ended_list_forgot_it(
    fastmcp_resumable_url: str, http: aiohttp.ClientSession
) -> None:
    """With a resumable upstream, a forgotten call used to look like another replica's call to take over:
    the old result came back. The handle says this replica issued it since it started: refused."""
    async with running_proxy(fastmcp_resumable_url, max_parked=1, max_parked_per_principal=1) as proxy:
        client = RawClient(proxy.url, http)
        first = await client.call("ask_name")
        assert (await client.retry(first, {"elicit-1": accept_name("A")}, "ask_name")).result
        for i in range(ENDED_PER_CALL + 1):  # push it out of the bounded memory of ended calls
            nth = await client.call("ask_name")
            assert (await client.retry(nth, {"elicit-1": accept_name(f"n{i}")}, "ask_name")).result
        registry = proxy.app[CALLS].registry
        assert not registry.ended(proxy.app[CODEC].open(first.result["requestState"]).call)  # forgotten
        replay = await client.retry(first, {"elicit-1": accept_name("again")}, "ask_name")
        assert replay.error == INVALID
        assert len(registry) == 0  # nothing was taken over


async def test_a_mistyped_answer_inside_the_content_keeps_the_call_parked(
    fastmcp_url: str, http: aiohttp.ClientSession
) -> None:
    async with running_proxy(fastmcp_url) as proxy:
        client = RawClient(proxy.url, http)
        first = await client.call("ask_name")
        mistyped = {"elicit-1": {"action": "accept", "content": {"name": 42}}}
        wrong = await client.retry(first, mistyped, "ask_name")
        assert wrong.error == {
            "code": -32602,
            "message": "inputResponses['elicit-1'] content.name: 42 is not of type 'string'",
        }
        assert proxy.parked == 1  # untouched: the same handle still answers it
        right = await client.retry(first, {"elicit-1": accept_name("Bo")}, "ask_name")
        assert right.result["content"][0]["text"] == "accept:Bo"
