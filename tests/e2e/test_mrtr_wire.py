"""MRTR through the proxy, on the wire: a raw client against FastMCP 1.30, a real legacy server."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest
import pytest_asyncio

from e2e import flows
from e2e.flows import text_of
from e2e.harness import ROOTS, SAMPLED, RawClient, RunningProxy, accept_name, running_proxy

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session")]


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def proxy(fastmcp_url: str) -> AsyncIterator[RunningProxy]:
    # A wide gather window: the tests that count rounds must not depend on how loaded the machine is.
    async with running_proxy(fastmcp_url, gather_window_ms=300) as running:
        yield running


@pytest_asyncio.fixture(loop_scope="session")
async def client(proxy: RunningProxy) -> AsyncIterator[RawClient]:
    async with aiohttp.ClientSession() as http:
        yield RawClient(proxy.url, http)


async def test_discover_describes_the_legacy_server(client: RawClient) -> None:
    reply = await client.request("server/discover")
    assert reply.status == 200
    result = reply.result
    assert result["resultType"] == "complete"
    assert result["supportedVersions"] == ["2026-07-28"]
    assert "tools" in result["capabilities"]
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "legacy-fastmcp-fixture"
    assert (result["ttlMs"], result["cacheScope"]) == (0, "private")


async def test_lists_are_relayed_as_complete_results(client: RawClient) -> None:
    reply = await client.request("tools/list")
    names = {tool["name"] for tool in reply.result["tools"]}
    assert {"echo", "ask_name", "all_at_once"} <= names
    assert reply.result["resultType"] == "complete"
    assert reply.result["cacheScope"] == "private"


async def test_plain_tool_completes_in_one_request(client: RawClient, proxy: RunningProxy) -> None:
    live_before = proxy.live  # the proxy is the module's: count what this test adds
    reply = await client.call("echo", {"text": "hello"})
    assert reply.result == {
        "content": [{"type": "text", "text": "hello"}],
        "isError": False,
        "resultType": "complete",
    }
    assert proxy.live == live_before


async def test_form_elicitation_round_trip_shape(client: RawClient, proxy: RunningProxy) -> None:
    live_before, parked_before = proxy.live, proxy.parked  # the module's proxy: count this test's
    first = await client.call("ask_name")
    result = first.result
    assert set(result) == {"resultType", "inputRequests", "requestState"}
    assert result["resultType"] == "input_required"
    ((key, request),) = result["inputRequests"].items()
    assert key == "elicit-1"
    assert request["method"] == "elicitation/create"
    assert request["params"]["message"] == "What is your name?"
    assert request["params"]["requestedSchema"]["properties"]["name"]["type"] == "string"
    assert isinstance(result["requestState"], str) and len(result["requestState"]) <= 512
    assert proxy.parked == parked_before + 1

    final = await client.retry(first, {key: accept_name("Alice")}, "ask_name")
    assert final.body["id"] != first.body["id"]
    assert final.result["resultType"] == "complete"
    assert text_of(final.result) == "accept:Alice"
    assert proxy.live == live_before


@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_decline_and_cancel_are_relayed_as_they_are(client: RawClient, action: str) -> None:
    first = await client.call("ask_name")
    final = await client.retry(first, {"elicit-1": {"action": action}}, "ask_name")
    assert text_of(final.result) == action


async def test_url_mode_elicitation(client: RawClient) -> None:
    first = await client.call("ask_url")
    ((key, request),) = first.result["inputRequests"].items()
    assert request["params"]["mode"] == "url"
    assert request["params"]["url"] == "https://example.com/authorise"
    assert request["params"]["elicitationId"]
    final = await client.retry(first, {key: {"action": "accept"}}, "ask_url")
    assert text_of(final.result) == "accept"


@pytest.mark.parametrize(
    ("tool", "method", "answer", "expected"),
    [
        ("sample", "sampling/createMessage", SAMPLED, "Paris"),  # FastMCP sends it on the GET stream
        ("sample_inline", "sampling/createMessage", SAMPLED, "Paris"),  # ... or on the call's POST stream
        ("roots", "roots/list", ROOTS, "file:///work/project"),  # GET stream
        ("roots_inline", "roots/list", ROOTS, "file:///work/project"),
    ],
)
async def test_sampling_and_roots_on_either_stream(
    client: RawClient, tool: str, method: str, answer: dict[str, object], expected: str
) -> None:
    args = {"prompt": "capital of France?"} if tool.startswith("sample") else {}
    first = await client.call(tool, args)
    ((key, request),) = first.result["inputRequests"].items()
    assert request["method"] == method
    final = await client.retry(first, {key: answer}, tool, args)
    assert text_of(final.result) == expected


async def test_two_sequential_elicitations_are_two_rounds(client: RawClient, proxy: RunningProxy) -> None:
    live_before = proxy.live  # the proxy is the module's: count what this test adds
    await flows.two_rounds(client)
    assert proxy.live == live_before


async def test_concurrent_requests_arrive_as_one_round_of_three_keys(client: RawClient) -> None:
    await flows.three_at_once(client)


async def test_missing_keys_are_asked_again_and_extra_keys_ignored(client: RawClient) -> None:
    first = await client.call("all_at_once", {"prompt": "p"})
    keys = {req["method"]: key for key, req in first.result["inputRequests"].items()}
    partial = await client.retry(
        first,
        {keys["elicitation/create"]: accept_name("Eve"), "no-such-key": {"action": "accept"}},
        "all_at_once",
        {"prompt": "p"},
    )
    assert partial.result["resultType"] == "input_required"
    again = partial.result["inputRequests"]
    assert set(again) == {keys["sampling/createMessage"], keys["roots/list"]}  # the same keys, asked again
    final = await client.retry(
        partial,
        {keys["sampling/createMessage"]: SAMPLED, keys["roots/list"]: ROOTS},
        "all_at_once",
        {"prompt": "p"},
    )
    assert text_of(final.result) == "elicit=accept:Eve;sample=Paris;roots=file:///work/project"


async def test_prompt_and_resource_that_elicit(client: RawClient) -> None:
    await flows.prompt_and_resource(client)


async def test_undeclared_capability_is_never_surfaced(client: RawClient) -> None:
    """A client without `roots` never sees roots/list: the upstream gets an error and its tool decides."""
    client.capabilities = {"elicitation": {}}
    reply = await client.call("roots")
    assert reply.result["resultType"] == "complete"
    assert reply.result["isError"] is True  # FastMCP turns the refused roots/list into a tool error


async def test_concurrent_calls_do_not_cross(client: RawClient) -> None:
    await flows.concurrent_calls(client, 8)


async def test_templates_and_completion_are_relayed(client: RawClient) -> None:
    templates = await client.request("resources/templates/list")
    assert templates.result["resultType"] == "complete"
    assert [t["uriTemplate"] for t in templates.result["resourceTemplates"]] == ["fixture://secret/{label}"]
    completion = await client.request(
        "completion/complete",
        {
            "ref": {"type": "ref/prompt", "name": "greeting_prompt"},
            "argument": {"name": "x", "value": ""},
        },
    )
    # FastMCP 1.30 without a completion handler: its own -32601 passes through, as a modern 404.
    assert completion.status == 404
    assert completion.error["code"] == -32601


async def test_sessions_are_deleted_upstream_on_shutdown(fastmcp_url: str) -> None:
    """Closing the proxy sends DELETE for every upstream session: the legacy server forgets them."""
    async with aiohttp.ClientSession() as http:
        async with running_proxy(fastmcp_url) as short:
            reply = await RawClient(short.url, http).call("whoami")
            session_id = reply.result["content"][0]["text"].split("|")[1]
            assert session_id
        probe = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        headers = {
            "Mcp-Session-Id": session_id,
            "MCP-Protocol-Version": "2025-11-25",
            "Accept": "application/json, text/event-stream",
        }
        async with http.post(fastmcp_url, json=probe, headers=headers) as resp:
            assert resp.status == 404  # FastMCP: unknown (terminated) session
