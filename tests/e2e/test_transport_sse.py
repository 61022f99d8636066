"""MRTR through the proxy to upstreams on the 2024-11-05 HTTP+SSE transport (`transport: sse`), on the wire:
a raw 2026-07-28 client, FastMCP 1.30 `--transport sse` and server-everything `sse` behind the proxy.

Also what the transport itself negotiates with each, and what happens when the upstream's one SSE stream
drops mid-call: the call fails with -31001 saying it was not re-run, and the proxy stays usable.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import peers
import pytest
import pytest_asyncio
from structlog.testing import capture_logs
from waiting import eventually

from e2e import flows
from e2e.flows import text_of
from e2e.harness import (
    NO_ROOTS_CAPS,
    ROOTS,
    SAMPLED,
    RawClient,
    Reply,
    RunningProxy,
    accept_name,
    running_proxy,
)
from proxy.upstream.base import UpstreamError
from proxy.upstream.http_sse import HttpSseSession
from proxy.upstream.streamable_http import SessionSettings
from proxy.wire import jsonrpc, mcp

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session")]

ALL_LEGACY_CAPS = {"elicitation": {"form": {}, "url": {}}, "sampling": {}, "roots": {"listChanged": False}}


@pytest_asyncio.fixture(loop_scope="session")
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as session:
        yield session


# -- what the transport negotiates ------------------------------------------------------------------------


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def everything_sse_url() -> AsyncIterator[peers.PeerUrl]:
    async with peers.start_server_everything("sse") as url:
        yield url


async def open_direct(url: str, versions: tuple[str, ...], http: aiohttp.ClientSession) -> HttpSseSession:
    settings = SessionSettings(url=url, versions=versions, capabilities={}, initialize_timeout=10)
    session = HttpSseSession(http, settings, lambda req: jsonrpc.error(req.id, jsonrpc.INVALID_PARAMS, "no"))
    try:
        await session.open()
    except BaseException:
        await session.close()
        raise
    return session


@pytest.mark.parametrize(
    "case",
    [(mcp.LEGACY_VERSIONS, "2025-11-25"), (("2024-11-05",), "2024-11-05"), (("2025-03-26",), "2025-03-26")],
)
@pytest.mark.parametrize("server", ["fastmcp", "everything"])
async def test_what_each_server_negotiates_over_sse(
    server: str,
    case: tuple[tuple[str, ...], str],
    fastmcp_sse_url: str,
    everything_sse_url: str,
    http: aiohttp.ClientSession,
) -> None:
    """Both servers echo the version offered first: with the default list they speak 2025-11-25 over the
    2024-11-05 transport; configured for 2024-11-05 only, they speak 2024-11-05."""
    versions, expected = case
    url = fastmcp_sse_url if server == "fastmcp" else everything_sse_url
    session = await open_direct(url, versions, http)
    try:
        assert session.info.protocol_version == expected
        reply = await session.request("tools/list", {}, timeout=10)
        assert isinstance(reply, jsonrpc.Result) and reply.result["tools"]
    finally:
        await session.close()


# -- FastMCP 1.30 over sse ----------------------------------------------------------------------------------


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def fastmcp_proxy(fastmcp_sse_url: str) -> AsyncIterator[RunningProxy]:
    async with running_proxy(fastmcp_sse_url, transport="sse") as running:
        yield running


@pytest_asyncio.fixture(loop_scope="session")
async def fastmcp(fastmcp_proxy: RunningProxy, http: aiohttp.ClientSession) -> RawClient:
    return RawClient(fastmcp_proxy.url, http)


async def test_fastmcp_discover_and_lists(fastmcp: RawClient) -> None:
    discover = await fastmcp.request("server/discover")
    assert discover.result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "legacy-fastmcp-fixture"
    tools = await fastmcp.request("tools/list")
    assert {"echo", "ask_name", "all_at_once"} <= {tool["name"] for tool in tools.result["tools"]}
    assert (tools.result["resultType"], tools.result["cacheScope"]) == ("complete", "private")


async def test_fastmcp_plain_tool(fastmcp: RawClient, fastmcp_proxy: RunningProxy) -> None:
    live_before = fastmcp_proxy.live  # the proxy is the module's: count what this test adds
    reply = await fastmcp.call("echo", {"text": "hello"})
    assert reply.result == {
        "content": [{"type": "text", "text": "hello"}],
        "isError": False,
        "resultType": "complete",
    }
    assert fastmcp_proxy.live == live_before


async def test_fastmcp_form_elicitation(fastmcp: RawClient, fastmcp_proxy: RunningProxy) -> None:
    live_before, parked_before = fastmcp_proxy.live, fastmcp_proxy.parked  # the module's proxy
    first = await fastmcp.call("ask_name")
    assert first.result["resultType"] == "input_required"
    ((key, request),) = first.result["inputRequests"].items()
    assert (key, request["method"]) == ("elicit-1", "elicitation/create")
    assert request["params"]["requestedSchema"]["properties"]["name"]["type"] == "string"
    assert fastmcp_proxy.parked == parked_before + 1
    final = await fastmcp.retry(first, {key: accept_name("Alice")}, "ask_name")
    assert final.result["resultType"] == "complete"
    assert text_of(final.result) == "accept:Alice"
    assert fastmcp_proxy.live == live_before


@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_fastmcp_decline_and_cancel(fastmcp: RawClient, action: str) -> None:
    first = await fastmcp.call("ask_name")
    final = await fastmcp.retry(first, {"elicit-1": {"action": action}}, "ask_name")
    assert text_of(final.result) == action


async def test_fastmcp_url_elicitation(fastmcp: RawClient) -> None:
    first = await fastmcp.call("ask_url")
    ((key, request),) = first.result["inputRequests"].items()
    assert request["params"]["mode"] == "url"
    assert request["params"]["url"] == "https://example.com/authorise"
    final = await fastmcp.retry(first, {key: {"action": "accept"}}, "ask_url")
    assert text_of(final.result) == "accept"


@pytest.mark.parametrize(
    ("tool", "method", "answer", "expected"),
    [
        ("sample", "sampling/createMessage", SAMPLED, "Paris"),
        ("sample_inline", "sampling/createMessage", SAMPLED, "Paris"),
        ("roots", "roots/list", ROOTS, "file:///work/project"),
        ("roots_inline", "roots/list", ROOTS, "file:///work/project"),
    ],
)
async def test_fastmcp_sampling_and_roots(
    fastmcp: RawClient, tool: str, method: str, answer: dict[str, Any], expected: str
) -> None:
    """Related or not, on this transport every server request comes on the one SSE stream."""
    args = {"prompt": "capital of France?"} if tool.startswith("sample") else {}
    first = await fastmcp.call(tool, args)
    ((key, request),) = first.result["inputRequests"].items()
    assert request["method"] == method
    final = await fastmcp.retry(first, {key: answer}, tool, args)
    assert text_of(final.result) == expected


async def test_fastmcp_two_rounds(fastmcp: RawClient, fastmcp_proxy: RunningProxy) -> None:
    live_before = fastmcp_proxy.live  # the proxy is the module's: count what this test adds
    await flows.two_rounds(fastmcp)
    assert fastmcp_proxy.live == live_before


async def test_fastmcp_all_three_at_once(fastmcp: RawClient) -> None:
    await flows.three_at_once(fastmcp)


async def test_fastmcp_prompt_and_resource(fastmcp: RawClient) -> None:
    await flows.prompt_and_resource(fastmcp)


async def test_fastmcp_concurrent_calls_do_not_cross(fastmcp: RawClient) -> None:
    await flows.concurrent_calls(fastmcp, 6)


async def test_fastmcp_2024_11_05_only(fastmcp_sse_url: str, http: aiohttp.ClientSession) -> None:
    """Configured for 2024-11-05 alone: sampling and roots work (elicitation does not exist in 2024-11-05;
    the proxy declares none upstream)."""
    async with running_proxy(fastmcp_sse_url, transport="sse", protocol_versions=("2024-11-05",)) as proxy:
        client = RawClient(proxy.url, http)
        first = await client.call("sample", {"prompt": "capital?"})
        ((key, request),) = first.result["inputRequests"].items()
        assert request["method"] == "sampling/createMessage"
        final = await client.retry(first, {key: SAMPLED}, "sample", {"prompt": "capital?"})
        assert text_of(final.result) == "Paris"
        first = await client.call("roots")
        final = await client.retry(first, {"roots-1": ROOTS}, "roots")
        assert text_of(final.result) == "file:///work/project"


# -- server-everything over sse ----------------------------------------------------------------------------


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def everything_proxy(everything_sse_url: str) -> AsyncIterator[RunningProxy]:
    async with running_proxy(everything_sse_url, transport="sse") as running:
        yield running


@pytest_asyncio.fixture(loop_scope="session")
async def everything(everything_proxy: RunningProxy, http: aiohttp.ClientSession) -> RawClient:
    return RawClient(everything_proxy.url, http, capabilities=dict(NO_ROOTS_CAPS))


async def test_everything_plain_tool_and_lists(everything: RawClient) -> None:
    reply = await everything.call("echo", {"message": "hi"})
    assert text_of(reply.result) == "Echo: hi"
    assert reply.result["resultType"] == "complete"
    tools = {tool["name"] for tool in (await everything.request("tools/list")).result["tools"]}
    assert {"trigger-elicitation-request", "trigger-sampling-request"} <= tools
    assert "get-roots-list" not in tools  # registered only for a client that declared roots


async def ask_and_answer(
    client: RawClient, tool: str, args: dict[str, Any], method: str, answer: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Call `tool`, answer its `method` request with `answer`; return (that request, the final result).

    server-everything sends `roots/list` by itself 350 ms after `initialized`; on a fresh session that lands
    in the round of whichever call is running (one stream, no link to a call), so it is answered too."""
    first = await client.call(tool, args)
    requests = first.result["inputRequests"]
    assert {req["method"] for req in requests.values()} <= {method, "roots/list"}, requests
    ours = [req for req in requests.values() if req["method"] == method]
    assert ours, requests
    responses = {key: answer if req["method"] == method else ROOTS for key, req in requests.items()}
    final = await client.retry(first, responses, tool, args)
    return ours[0], final.result


@pytest.mark.parametrize(
    ("answer", "fragment"),
    [
        (accept_name("Alice"), "- Name: Alice"),
        ({"action": "decline"}, "declined"),
        ({"action": "cancel"}, "cancelled"),
    ],
)
async def test_everything_form_elicitation(
    everything: RawClient, answer: dict[str, Any], fragment: str
) -> None:
    request, result = await ask_and_answer(
        everything, "trigger-elicitation-request", {}, "elicitation/create", answer
    )
    assert "mode" not in request["params"] or request["params"]["mode"] == "form"
    assert fragment in text_of(result)


async def test_everything_url_elicitation(everything: RawClient) -> None:
    args = {"url": "https://example.com/x"}
    request, result = await ask_and_answer(
        everything, "trigger-url-elicitation", args, "elicitation/create", {"action": "accept"}
    )
    assert (request["params"]["mode"], request["params"]["url"]) == ("url", "https://example.com/x")
    assert "User completed the URL elicitation flow" in text_of(result)


async def test_everything_sampling(everything: RawClient) -> None:
    args = {"prompt": "capital?"}
    _, result = await ask_and_answer(
        everything, "trigger-sampling-request", args, "sampling/createMessage", SAMPLED
    )
    assert '"text": "Paris"' in text_of(result)


async def test_everything_roots(everything_sse_url: str, http: aiohttp.ClientSession) -> None:
    """Its start-up roots/list comes with no call in flight: the session holds it, and the first call asks
    the client in its first round, before the call is sent (calls/roots.py); get-roots-list then shows the
    answer the server cached. (Cached per session: a fresh proxy.)"""
    async with running_proxy(everything_sse_url, transport="sse") as proxy:
        client = RawClient(proxy.url, http)
        with capture_logs() as logs:
            assert (await client.request("tools/list")).result["tools"]  # opens the session
            # The server's own roots/list comes 350 ms after `initialized`, with no call in flight: held.
            await eventually(
                lambda: any(e["event"] == "upstream.roots_held" for e in logs),
                "the session to hold the server's start-up roots/list",
                10,
            )
        first = await client.call("get-roots-list")
        ((key, request),) = first.result["inputRequests"].items()
        assert request["method"] == "roots/list"
        final = await client.retry(first, {key: ROOTS}, "get-roots-list")
        assert "URI: file:///work/project" in text_of(final.result)


async def test_everything_prompt_and_resource(everything: RawClient) -> None:
    prompt = await everything.request("prompts/get", {"name": "args-prompt", "arguments": {"city": "Paris"}})
    assert prompt.result["resultType"] == "complete"
    assert "Paris" in prompt.result["messages"][0]["content"]["text"]
    listed = await everything.request("resources/list")
    uri = listed.result["resources"][0]["uri"]
    resource = await everything.request("resources/read", {"uri": uri})
    assert resource.result["contents"][0]["uri"] == uri
    assert (resource.result["resultType"], resource.result["cacheScope"]) == ("complete", "private")


async def test_everything_2024_11_05_only(everything_sse_url: str, http: aiohttp.ClientSession) -> None:
    """Configured for 2024-11-05 alone the proxy declares no elicitation, so server-everything does not even
    register its elicitation tools; sampling still works."""
    async with running_proxy(everything_sse_url, transport="sse", protocol_versions=("2024-11-05",)) as proxy:
        client = RawClient(proxy.url, http, capabilities=dict(NO_ROOTS_CAPS))  # its start-up roots: not here
        tools = {tool["name"] for tool in (await client.request("tools/list")).result["tools"]}
        assert "trigger-sampling-request" in tools
        assert "trigger-elicitation-request" not in tools
        args = {"prompt": "capital?"}
        _, result = await ask_and_answer(
            client, "trigger-sampling-request", args, "sampling/createMessage", SAMPLED
        )
        assert '"text": "Paris"' in text_of(result)


# -- the stream dropping -----------------------------------------------------------------------------------


def kill(url: peers.PeerUrl) -> None:
    """SIGKILL the peer's process group (the harness started it in its own session)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(url.peer.pid, signal.SIGKILL)


@contextlib.asynccontextmanager
async def fastmcp_sse_on(port: int) -> AsyncIterator[peers.PeerProcess]:
    """FastMCP `--transport sse` on a given port (the harness only picks fresh ones); always stopped."""
    argv = [str(peers.legacy_python()), str(peers.legacy_fastmcp_script()), "--transport", "sse"]
    argv += ["--host", peers.LOOPBACK, "--port", str(port)]
    with tempfile.TemporaryDirectory(prefix="mrtr-peer-fastmcp-restart-") as tmp:
        log_path = Path(tmp) / "fastmcp.log"
        with log_path.open("wb") as log:
            process = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=log,
                stderr=asyncio.subprocess.STDOUT,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
                start_new_session=True,
            )
        peer = peers.PeerProcess("fastmcp-restarted", argv, port, process, log_path)
        try:
            await peer.wait_ready()
            yield peer
        finally:
            await peer.stop()


def assert_not_rerun(reply: Reply, *fragments: str) -> None:
    assert reply.status == 200
    error = reply.error
    assert error["code"] == jsonrpc.UPSTREAM_FAILED, error
    for fragment in fragments:
        assert fragment in error["message"], error


async def test_stream_dropping_mid_call_fails_it_and_the_proxy_recovers(http: aiohttp.ClientSession) -> None:
    async with peers.start_fastmcp("sse") as url, running_proxy(url, transport="sse") as proxy:
        client = RawClient(proxy.url, http)
        assert text_of((await client.call("echo", {"text": "before"})).result) == "before"

        # 1. The tool is running upstream when the server dies: the call fails at once, not re-run.
        running = asyncio.create_task(client.call("slow_echo", {"text": "never", "delay_s": 30}))
        await eventually(lambda: proxy.live == 1, "the call in the proxy's registry", 10)
        await eventually(  # the tool is running upstream (it says so on stderr: the fixture's `_began`)
            lambda: "slow_echo: sleeping" in url.peer.log_text(None), "the server to begin slow_echo", 10
        )
        kill(url)
        async with asyncio.timeout(10):
            failed = await running
        assert_not_rerun(failed, "SSE stream ended", "cannot be resumed", "it was not re-run")
        assert proxy.live == 0

        # 2. The next call on the same proxy gets a clean error too, not a hang.
        async with asyncio.timeout(10):
            again = await client.call("echo", {"text": "after"})
        assert again.error["code"] == jsonrpc.UPSTREAM_FAILED
        assert "unavailable" in again.error["message"]
        assert proxy.live == 0

        # 3. The server comes back on the same port: the same proxy works again, on a new session.
        await url.peer.process.wait()
        async with fastmcp_sse_on(url.peer.port):
            async with asyncio.timeout(20):
                back = await client.call("echo", {"text": "back"})
            assert text_of(back.result) == "back"
            first = await client.call("ask_name")
            final = await client.retry(first, {"elicit-1": accept_name("Ann")}, "ask_name")
            assert text_of(final.result) == "accept:Ann"


async def test_stream_dropping_while_parked_fails_the_retry(http: aiohttp.ClientSession) -> None:
    async with peers.start_fastmcp("sse") as url, running_proxy(url, transport="sse") as proxy:
        client = RawClient(proxy.url, http)
        first = await client.call("ask_name")
        assert first.result["resultType"] == "input_required"
        assert proxy.parked == 1
        kill(url)
        await url.peer.process.wait()
        async with asyncio.timeout(10):
            final = await client.retry(first, {"elicit-1": accept_name("Alice")}, "ask_name")
        assert_not_rerun(final, "SSE stream ended", "it was not re-run")
        assert proxy.live == 0
        with pytest.raises(UpstreamError):  # and nothing is left listening
            await open_direct(url, ("2024-11-05",), http)
