"""mcp==2.3.0's own `Client(mode="2026-07-28")` through the proxy, against both real legacy servers.

The client handles `input_required` by itself (calling its callbacks and retrying), so these tests show the
proxy is a 2026-07-28 server to software nobody here wrote. Each module runs the client once over a plan of
steps; each test checks one step.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import peers
import pytest
import pytest_asyncio

from e2e.harness import RawClient, running_proxy

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session")]

DRIVER = Path(__file__).parent / "clients" / "modern_client.py"


async def run_plan(url: str, plan: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    run = await peers.run_once([str(peers.client_python()), str(DRIVER), url, json.dumps(plan)], limit_s=90)
    assert run.returncode == 0 and not run.timed_out, run.stderr[-3000:]
    results: dict[str, Any] = json.loads(run.stdout)
    assert results.pop("_protocol_version") == "2026-07-28"  # it stayed modern all the way
    return results


FASTMCP_PLAN: list[dict[str, Any]] = [
    {"id": "plain", "kind": "tool", "name": "echo", "args": {"text": "no elicitation"}},
    {"id": "form-accept", "kind": "tool", "name": "ask_name", "elicit": "accept"},
    {"id": "form-decline", "kind": "tool", "name": "ask_name", "elicit": "decline"},
    {"id": "form-cancel", "kind": "tool", "name": "ask_name", "elicit": "cancel"},
    {"id": "url", "kind": "tool", "name": "ask_url"},
    {"id": "sampling-get-stream", "kind": "tool", "name": "sample", "args": {"prompt": "capital?"}},
    {"id": "sampling-inline", "kind": "tool", "name": "sample_inline", "args": {"prompt": "capital?"}},
    {"id": "roots-get-stream", "kind": "tool", "name": "roots"},
    {"id": "two-rounds", "kind": "tool", "name": "two_questions"},
    {"id": "three-at-once", "kind": "tool", "name": "all_at_once", "args": {"prompt": "capital?"}},
    {"id": "prompt", "kind": "prompt", "name": "greeting_prompt"},
    {"id": "resource", "kind": "resource", "name": "fixture://secret"},
]
FASTMCP_EXPECTED = {
    "plain": ("no elicitation", []),
    "form-accept": ("accept:Alice", ["elicit:form"]),
    "form-decline": ("decline", ["elicit:form"]),
    "form-cancel": ("cancel", ["elicit:form"]),
    "url": ("accept", ["elicit:url"]),
    "sampling-get-stream": ("Paris", ["sample"]),
    "sampling-inline": ("Paris", ["sample"]),
    "roots-get-stream": ("file:///work/project", ["roots"]),
    "two-rounds": ("accept:Alice|accept:green", ["elicit:form", "elicit:form"]),
    "three-at-once": ("elicit=accept:Alice;sample=Paris;roots=file:///work/project", None),
    "prompt": ("Hello, Alice!", ["elicit:form"]),
    "resource": ("fixture:s3cr3t", ["elicit:form"]),
}


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def fastmcp_results(fastmcp_url: str) -> AsyncIterator[dict[str, dict[str, Any]]]:
    async with running_proxy(fastmcp_url) as proxy:
        yield await run_plan(proxy.url, FASTMCP_PLAN)


@pytest.mark.parametrize("step", list(FASTMCP_EXPECTED))
async def test_fastmcp_flow(fastmcp_results: dict[str, dict[str, Any]], step: str) -> None:
    text, seen = FASTMCP_EXPECTED[step]
    outcome = fastmcp_results[step]
    assert "error" not in outcome, outcome
    assert outcome["text"] == text
    assert outcome["is_error"] is False
    if seen is None:  # concurrent requests: one round, all three callbacks, in any order
        assert sorted(outcome["seen"]) == ["elicit:form", "roots", "sample"]
    else:
        assert outcome["seen"] == seen


EVERYTHING_PLAN: list[dict[str, Any]] = [
    {"id": "plain", "kind": "tool", "name": "echo", "args": {"message": "hi"}},
    {"id": "elicitation", "kind": "tool", "name": "trigger-elicitation-request"},
    {
        "id": "url",
        "kind": "tool",
        "name": "trigger-url-elicitation",
        "args": {"url": "https://example.com/x"},
    },
    {"id": "sampling", "kind": "tool", "name": "trigger-sampling-request", "args": {"prompt": "capital?"}},
    {"id": "roots", "kind": "tool", "name": "get-roots-list"},
    {"id": "declined", "kind": "tool", "name": "trigger-elicitation-request", "elicit": "decline"},
]


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def everything_results(server_everything_url: str) -> AsyncIterator[dict[str, dict[str, Any]]]:
    async with running_proxy(server_everything_url) as proxy:
        yield await run_plan(proxy.url, EVERYTHING_PLAN)


@pytest.mark.parametrize(
    ("step", "fragment", "seen"),
    [
        # server-everything asks roots 350 ms after `initialized`: the first call waits for that start-up
        # request (the upstream's start-up window, calls/roots.py) and asks it first; the server keeps roots
        # as session state, so every later call is asked for its client's roots first too (docs/calls.md,
        # "Roots asked before any call"); get-roots-list then answers from what the server was given.
        ("plain", "Echo: hi", ["roots"]),
        ("elicitation", "- Name: Alice", ["roots", "elicit:form"]),
        ("url", '"action": "accept"', ["roots", "elicit:url"]),
        ("sampling", '"text": "Paris"', ["roots", "sample"]),
        ("roots", "URI: file:///work/project", ["roots"]),
        ("declined", "decline", ["roots", "elicit:form"]),
    ],
)
async def test_server_everything_flow(
    everything_results: dict[str, dict[str, Any]], step: str, fragment: str, seen: list[str]
) -> None:
    outcome = everything_results[step]
    assert "error" not in outcome, outcome
    assert fragment in outcome["text"]
    assert outcome["seen"] == seen


async def test_a_full_replica_reaches_the_client_as_its_31003_error(fastmcp_url: str) -> None:
    """A new call turned away at admission is HTTP 503 with a -31003 body (so a balancer can send it on);
    a client that reaches only this replica gets the JSON-RPC error out of it, not a crash."""
    async with running_proxy(fastmcp_url, max_calls_per_address=1) as proxy, aiohttp.ClientSession() as http:
        holder = await RawClient(proxy.url, http).call("ask_name")  # 127.0.0.1's one call: parked
        assert holder.result["resultType"] == "input_required"
        step = {"id": "full", "kind": "tool", "name": "echo", "args": {"text": "x"}}
        refused = await run_plan(proxy.url, [step])
    assert refused["full"]["error"] == (
        "MCPError: Too many calls: this client address holds 1 parked or running calls "
        "(calls.max_calls_per_address); finish or abandon some first"
    )
