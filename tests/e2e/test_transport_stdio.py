"""MRTR through the proxy with stdio upstreams: FastMCP 1.30 and server-everything run as child processes.

Over stdio every server request and response shares the child's stdout: FastMCP sends elicitation, sampling
and roots (with or without a related request id) on the same pipe, ids counting from 0 per process;
server-everything sends its startup `roots/list` ~350 ms after `initialized` and a `notifications/message`
when roots arrive. One child is one session, so each receiving call has a child of its own.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator, Iterator, MutableMapping
from dataclasses import replace
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
from e2e.harness import NO_ROOTS_CAPS, ROOTS, SAMPLED, RawClient, RunningProxy, accept_name, running_proxy
from proxy.config import PoolConfig, UpstreamConfig
from proxy.process.appstate import ERAS, POOLS
from proxy.wire import jsonrpc

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session")]

WAIT = 30.0


def fastmcp_stdio(tag: str, max_sessions: int = 1024) -> UpstreamConfig:
    """`tag` goes into the children's environment (MRTR_TEST_TAG), so a test finds its own children."""
    return UpstreamConfig(
        name="default",
        transport="stdio",
        command=str(peers.legacy_python()),
        args=(str(peers.legacy_fastmcp_script()), "--transport", "stdio"),
        env={"MRTR_TEST_TAG": tag},
        pool=PoolConfig(max_sessions=max_sessions),
    )


def everything_stdio() -> UpstreamConfig:
    return UpstreamConfig(
        name="default",
        transport="stdio",
        command=str(peers.node_bin()),
        args=(str(peers.server_everything_entry()), "stdio"),
        env={"MRTR_TEST_TAG": "everything"},
    )


def stdio_children(tag: str | None = None) -> list[int]:
    """Our own child processes that are stdio peers (FastMCP fixture or server-everything), zombies too;
    with `tag`, only those started with that MRTR_TEST_TAG."""
    me, found = os.getpid(), []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) != me or b"stdio" not in argv:
            continue
        if not any(a.endswith((b"legacy_fastmcp_server.py", b"dist/index.js")) for a in argv):
            continue
        if tag is not None and not _has_tag(entry, tag):
            continue
        found.append(int(entry.name))
    return found


def _has_tag(proc: Path, tag: str) -> bool:
    try:
        return f"MRTR_TEST_TAG={tag}".encode() in (proc / "environ").read_bytes().split(b"\0")
    except OSError:
        return False


@pytest.fixture(autouse=True, scope="module")
def _no_stdio_children_left() -> Iterator[None]:
    yield
    assert stdio_children() == [], "a stdio upstream child outlived its proxy"


@pytest_asyncio.fixture(loop_scope="session")
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


async def round_trip(
    client: RawClient, tool: str, answer: dict[str, Any], args: dict[str, Any] | None = None
) -> str:
    """Call `tool`, expect exactly one input request, answer it; the final text."""
    first = await client.call(tool, args)
    assert first.result["resultType"] == "input_required", first.body
    ((key, _),) = first.result["inputRequests"].items()
    final = await client.retry(first, {key: answer}, tool, args)
    assert final.result["resultType"] == "complete", final.body
    return text_of(final.result)


# -- FastMCP 1.30 over stdio: the flows of test_mrtr_wire.py --------------------------------------------


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def fastmcp_proxy() -> AsyncIterator[RunningProxy]:
    peers.require_peers()
    async with running_proxy(fastmcp_stdio("flows")) as running:
        yield running


@pytest_asyncio.fixture(loop_scope="session")
async def fastmcp(fastmcp_proxy: RunningProxy, http: aiohttp.ClientSession) -> RawClient:
    return RawClient(fastmcp_proxy.url, http)


async def test_fastmcp_discover_and_lists(fastmcp: RawClient) -> None:
    discover = (await fastmcp.request("server/discover")).result
    assert discover["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "legacy-fastmcp-fixture"
    tools = (await fastmcp.request("tools/list")).result
    assert {"echo", "ask_name", "all_at_once"} <= {t["name"] for t in tools["tools"]}
    assert (tools["resultType"], tools["cacheScope"]) == ("complete", "private")


async def test_fastmcp_plain_tool(fastmcp: RawClient, fastmcp_proxy: RunningProxy) -> None:
    live_before = fastmcp_proxy.live  # the proxy is the module's: count what this test adds
    reply = await fastmcp.call("echo", {"text": "hello"})
    assert reply.result == {
        "content": [{"type": "text", "text": "hello"}],
        "isError": False,
        "resultType": "complete",
    }
    assert fastmcp_proxy.live == live_before


async def test_fastmcp_form_accept(fastmcp: RawClient, fastmcp_proxy: RunningProxy) -> None:
    live_before, parked_before = fastmcp_proxy.live, fastmcp_proxy.parked  # the module's proxy
    first = await fastmcp.call("ask_name")
    ((key, request),) = first.result["inputRequests"].items()
    assert key == "elicit-1"
    assert request["method"] == "elicitation/create"
    assert request["params"]["requestedSchema"]["properties"]["name"]["type"] == "string"
    assert fastmcp_proxy.parked == parked_before + 1
    final = await fastmcp.retry(first, {key: accept_name("Alice")}, "ask_name")
    assert text_of(final.result) == "accept:Alice"
    assert fastmcp_proxy.live == live_before


@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_fastmcp_decline_and_cancel(fastmcp: RawClient, action: str) -> None:
    assert await round_trip(fastmcp, "ask_name", {"action": action}) == action


async def test_fastmcp_url_mode(fastmcp: RawClient) -> None:
    first = await fastmcp.call("ask_url")
    ((key, request),) = first.result["inputRequests"].items()
    assert request["params"]["mode"] == "url"
    assert request["params"]["url"] == "https://example.com/authorise"
    final = await fastmcp.retry(first, {key: {"action": "accept"}}, "ask_url")
    assert text_of(final.result) == "accept"


@pytest.mark.parametrize(
    ("tool", "answer", "expected"),
    [
        ("sample", SAMPLED, "Paris"),  # no related request id: on stdio it is the same pipe anyway
        ("sample_inline", SAMPLED, "Paris"),
        ("roots", ROOTS, "file:///work/project"),
        ("roots_inline", ROOTS, "file:///work/project"),
    ],
)
async def test_fastmcp_sampling_and_roots(
    fastmcp: RawClient, tool: str, answer: dict[str, Any], expected: str
) -> None:
    args = {"prompt": "capital of France?"} if tool.startswith("sample") else {}
    assert await round_trip(fastmcp, tool, answer, args) == expected


async def test_fastmcp_two_rounds(fastmcp: RawClient, fastmcp_proxy: RunningProxy) -> None:
    live_before = fastmcp_proxy.live  # the proxy is the module's: count what this test adds
    await flows.two_rounds(fastmcp)
    assert fastmcp_proxy.live == live_before


async def test_fastmcp_all_three_at_once(fastmcp: RawClient) -> None:
    await flows.three_at_once(fastmcp)


async def test_fastmcp_prompt_and_resource(fastmcp: RawClient) -> None:
    await flows.prompt_and_resource(fastmcp)


async def test_fastmcp_undeclared_capability_is_never_surfaced(fastmcp: RawClient) -> None:
    fastmcp.capabilities = {"elicitation": {}}
    reply = await fastmcp.call("roots")
    assert reply.result["resultType"] == "complete"
    assert reply.result["isError"] is True


async def test_fastmcp_concurrent_calls_each_get_a_child(fastmcp: RawClient) -> None:
    def each_parked_call_holds_a_child() -> None:
        assert len(stdio_children("flows")) >= 4

    await flows.concurrent_calls(fastmcp, 4, while_parked=each_parked_call_holds_a_child)


# -- server-everything over stdio -----------------------------------------------------------------------


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def everything_proxy() -> AsyncIterator[RunningProxy]:
    peers.require_peers()
    async with running_proxy(everything_stdio()) as running:
        yield running


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def everything_warm(everything_proxy: RunningProxy) -> AsyncIterator[str]:
    """One idle child for the calls to reuse. Its clients declare no roots, so it never sends its startup
    `roots/list` (test_everything_roots has a client and a child of its own)."""
    async with aiohttp.ClientSession() as http:
        client = RawClient(everything_proxy.url, http, capabilities=dict(NO_ROOTS_CAPS))
        info = (await client.request("server/discover")).result
    pool = everything_proxy.app[POOLS]["default"]
    await eventually(lambda: (pool.size, pool.in_use) == (1, 0), "one idle child in the pool", WAIT)
    yield info["_meta"]["io.modelcontextprotocol/serverInfo"]["name"]


@pytest_asyncio.fixture(loop_scope="session")
async def everything(
    everything_proxy: RunningProxy, everything_warm: str, http: aiohttp.ClientSession
) -> RawClient:
    assert everything_warm == "mcp-servers/everything"
    return RawClient(everything_proxy.url, http, capabilities=dict(NO_ROOTS_CAPS))


async def test_everything_plain_tool(everything: RawClient) -> None:
    reply = await everything.call("echo", {"message": "hi"})
    assert text_of(reply.result) == "Echo: hi"
    assert reply.notifications == []  # the tools/list_changed it sends at start are session-wide


@pytest.mark.parametrize(
    ("answer", "fragment"),
    [
        (accept_name("Alice"), "- Name: Alice"),
        ({"action": "decline"}, "declined"),
        ({"action": "cancel"}, "cancelled"),
    ],
)
async def test_everything_form(everything: RawClient, answer: dict[str, Any], fragment: str) -> None:
    assert fragment in await round_trip(everything, "trigger-elicitation-request", answer)


async def test_everything_url_mode(everything: RawClient) -> None:
    args = {"url": "https://example.com/x"}
    first = await everything.call("trigger-url-elicitation", args)
    ((key, request),) = first.result["inputRequests"].items()
    assert (request["params"]["mode"], request["params"]["url"]) == ("url", "https://example.com/x")
    final = await everything.retry(first, {key: {"action": "accept"}}, "trigger-url-elicitation", args)
    assert "User completed the URL elicitation flow" in text_of(final.result)


async def test_everything_sampling(everything: RawClient) -> None:
    text = await round_trip(everything, "trigger-sampling-request", SAMPLED, {"prompt": "capital?"})
    assert '"text": "Paris"' in text


async def test_everything_roots(everything_proxy: RunningProxy, http: aiohttp.ClientSession) -> None:
    """A client that declares roots gets a child of its own; the child's startup `roots/list` (held by the
    session, or arriving within the call) and the tool's own come in the call's round, all answered."""
    client = RawClient(everything_proxy.url, http)
    first = await client.call("get-roots-list")
    requests = first.result["inputRequests"]
    assert {r["method"] for r in requests.values()} == {"roots/list"}
    final = await client.retry(first, dict.fromkeys(requests, ROOTS), "get-roots-list")
    assert "URI: file:///work/project" in text_of(final.result)
    # Its "Roots updated" log arrives while the call owns the child, but this request did not opt in to
    # logging (no io.modelcontextprotocol/logLevel in its _meta): the proxy must not relay it.
    assert [n["method"] for n in final.notifications] == []


async def test_everything_prompt_and_resource(everything: RawClient) -> None:
    prompt = await everything.request("prompts/get", {"name": "simple-prompt", "arguments": {}})
    assert prompt.result["resultType"] == "complete"
    assert prompt.result["messages"][0]["content"]["type"] == "text"
    listed = await everything.request("resources/list")
    uri = listed.result["resources"][0]["uri"]
    read = await everything.request("resources/read", {"uri": uri})
    assert read.result["resultType"] == "complete"
    assert read.result["contents"][0]["uri"] == uri


# -- a child killed mid-call; the pool's cap ------------------------------------------------------------


def logged(logs: list[MutableMapping[str, Any]], event: str, **fields: object) -> bool:
    """Is there an `event` line with these `fields` among the captured `logs`?"""
    return any(e["event"] == event and all(e.get(k) == v for k, v in fields.items()) for e in logs)


async def only_child(tag: str) -> int:
    """The pid of the one stdio child started with `tag`, once it is there."""

    def one() -> list[int] | None:
        children = stdio_children(tag)
        return children if len(children) == 1 else None

    (pid,) = await eventually(
        one, f"exactly one stdio child tagged {tag}", WAIT, seen=lambda: stdio_children(tag)
    )
    return pid


async def test_child_killed_while_parked(http: aiohttp.ClientSession) -> None:
    async with running_proxy(fastmcp_stdio("parked")) as proxy:
        client = RawClient(proxy.url, http)
        first = await client.call("ask_name")
        assert first.result["resultType"] == "input_required"
        victim = await only_child("parked")
        with capture_logs() as logs:
            os.kill(victim, signal.SIGKILL)
            await eventually(
                lambda: logged(logs, "upstream.child_lost", pid=victim),
                "the proxy to see its child die",
                WAIT,
            )

        failed = await client.retry(first, {"elicit-1": accept_name()}, "ask_name")
        assert failed.status == 200
        assert failed.error["code"] == jsonrpc.UPSTREAM_FAILED
        assert "upstream process was killed by SIGKILL" in failed.error["message"]
        assert "not re-run" in failed.error["message"]
        assert proxy.live == 0

        again = await client.call("echo", {"text": "fresh"})
        assert text_of(again.result) == "fresh"
        assert await only_child("parked") != victim
        first = await client.call("ask_name")  # MRTR works on the fresh child too
        final = await client.retry(first, {"elicit-1": accept_name("New")}, "ask_name")
        assert text_of(final.result) == "accept:New"
    assert stdio_children("parked") == []


async def test_child_killed_while_running(http: aiohttp.ClientSession) -> None:
    async with running_proxy(fastmcp_stdio("running")) as proxy:
        client = RawClient(proxy.url, http)
        # era auto: the probe's own child (server/discover first, refused: legacy) is gone before the call's
        assert await proxy.app[ERAS].era("default") == "legacy"
        slow = asyncio.ensure_future(client.call("slow_echo", {"text": "never", "delay_s": 60}))
        victim = await only_child("running")
        with capture_logs() as logs:
            await eventually(lambda: proxy.live == 1, "the call in the proxy's registry", WAIT)
            await eventually(  # the tool is running in the child (it says so on stderr: fixture's `_began`)
                lambda: logged(logs, "upstream.stderr", pid=victim, line="slow_echo: sleeping"),
                "the child to begin slow_echo",
                WAIT,
            )
        os.kill(victim, signal.SIGKILL)
        async with asyncio.timeout(WAIT):
            failed = await slow
        assert failed.error["code"] == jsonrpc.UPSTREAM_FAILED
        assert "upstream process was killed by SIGKILL" in failed.error["message"]
        assert proxy.live == 0

        again = await client.call("echo", {"text": "fresh"})
        assert text_of(again.result) == "fresh"
        assert await only_child("running") != victim
    assert stdio_children("running") == []


async def test_pool_cap_is_the_number_of_children(http: aiohttp.ClientSession) -> None:
    cap = 3
    # Every session may hold a parked call here (calls.parked_share 1.0), and a full pool refuses at once.
    # One client takes them all: the per-address shares (and the fair share of parking room) are off.
    upstream = replace(fastmcp_stdio("capped"), pool=PoolConfig(max_sessions=cap, acquire_timeout_s=0))
    async with running_proxy(upstream, parked_share=1.0, max_calls_per_address=0) as proxy:
        client = RawClient(proxy.url, http)
        firsts = await asyncio.gather(*(client.call("ask_name") for _ in range(cap)))
        assert all(f.result["resultType"] == "input_required" for f in firsts)
        assert len(stdio_children("capped")) == cap
        assert proxy.parked == cap

        over = await client.call("ask_name")
        assert over.error["code"] == jsonrpc.LIMIT_EXCEEDED
        assert over.error["message"] == (
            "Too many calls: upstream 'default' has 3 sessions open (pool.max_sessions)"
        )
        assert len(stdio_children("capped")) == cap

        finals = await asyncio.gather(
            *(
                client.retry(first, {"elicit-1": accept_name(f"u{i}")}, "ask_name")
                for i, first in enumerate(firsts)
            )
        )
        assert [text_of(f.result) for f in finals] == [f"accept:u{i}" for i in range(cap)]
        after = await client.call("echo", {"text": "room again"})  # an idle child is reused
        assert text_of(after.result) == "room again"
        assert len(stdio_children("capped")) <= cap
    assert stdio_children("capped") == []
