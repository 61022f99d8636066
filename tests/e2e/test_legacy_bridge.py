"""Legacy clients of `stdio` and `sse` upstreams: the stateful bridge (proxy/front/legacy/bridge/front.py).

mcp 2.3.0 in `legacy` mode (initialize, Mcp-Session-Id, inline server requests, GET stream) runs form
elicitation, sampling, roots, two rounds and a prompt through the proxy to FastMCP 1.30 run as a stdio child
and over HTTP+SSE — while mcp 2.3.0 in `2026-07-28` mode runs the same plan as MRTR rounds against the same
proxy. Then, on the wire with a raw legacy client: the session id is bound to its principal, DELETE stops the
stdio child, the call's notifications come before its response under the client's id, a cancel reaches the
upstream call, a server request with no call in flight goes to the GET stream (and the answer POSTed back
reaches the upstream), and an idle session is closed.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import peers
import pytest
import pytest_asyncio
from structlog.testing import capture_logs
from waiting import eventually

from e2e.harness import RunningProxy, running_proxy
from e2e.test_legacy_clients import EXPECTED, run_client
from e2e.test_transport_stdio import stdio_children
from proxy.config import PoolConfig, UpstreamConfig
from proxy.wire.sse import SSEDecoder

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session")]

WAIT = 30.0
CAPS = {"elicitation": {"form": {}}, "sampling": {}, "roots": {"listChanged": True}}
ROOT = "file:///work/bridged"


def fastmcp_stdio(tag: str, **pool: Any) -> UpstreamConfig:
    """`tag` goes into the children's environment (MRTR_TEST_TAG), so a test finds its own children."""
    return UpstreamConfig(
        name="default",
        transport="stdio",
        command=str(peers.legacy_python()),
        args=(str(peers.legacy_fastmcp_script()), "--transport", "stdio"),
        env={"MRTR_TEST_TAG": tag},
        pool=PoolConfig(**pool),
    )


@pytest.fixture(autouse=True, scope="module")
def _no_stdio_children_left() -> Iterator[None]:
    yield
    assert stdio_children() == [], "a bridged stdio child outlived its proxy"


@dataclass
class Legacy:
    """A legacy Streamable HTTP client by hand: every header visible."""

    url: str
    http: aiohttp.ClientSession
    authorization: str = "Bearer alice"
    session: str | None = None
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def headers(self, **extra: str) -> dict[str, str]:
        out = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
        out["Authorization"] = self.authorization
        if self.session is not None:
            out.update({"Mcp-Session-Id": self.session, "MCP-Protocol-Version": "2025-11-25"})
        return {**out, **extra}

    async def post(self, message: dict[str, Any], **extra: str) -> tuple[int, list[dict[str, Any]]]:
        async with self.http.post(self.url, json=message, headers=self.headers(**extra)) as resp:
            raw = await resp.read()
            if resp.content_type == "text/event-stream":
                return resp.status, [json.loads(e.data) for e in SSEDecoder().feed(raw)]
            return resp.status, [json.loads(raw)] if raw else []

    async def request(
        self, method: str, params: dict[str, Any] | None = None
    ) -> tuple[int, list[dict[str, Any]]]:
        return await self.post(
            {"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": params or {}}
        )

    async def initialize(self, caps: dict[str, Any] | None = None) -> dict[str, Any]:
        params = {
            "protocolVersion": "2025-06-18",
            "capabilities": caps or {},
            "clientInfo": {"name": "raw", "version": "1"},
        }
        async with self.http.post(
            self.url,
            json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params},
            headers=self.headers(),
        ) as resp:
            assert resp.status == 200, await resp.text()
            self.session = resp.headers["Mcp-Session-Id"]
            body = await resp.read()
        (answer,) = [json.loads(e.data) for e in SSEDecoder().feed(body)]
        status, _ = await self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert status == 202
        return answer  # type: ignore[no-any-return]


async def next_message(stream: aiohttp.ClientResponse, method: str) -> dict[str, Any]:
    """The first message with `method` on an open SSE response, skipping others (bounded by the caller)."""
    decoder = SSEDecoder()
    while True:
        chunk = await stream.content.readany()
        assert chunk, "the stream ended"
        for event in decoder.feed(chunk):
            if event.data.strip() and (message := json.loads(event.data)).get("method") == method:
                return message  # type: ignore[no-any-return]


@pytest_asyncio.fixture(loop_scope="session")
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=90)) as session:
        yield session


# -- real clients, old and new, at the same time -----------------------------------------------------------


async def both_clients(proxy: RunningProxy) -> None:
    legacy, modern = await asyncio.gather(
        run_client(proxy.url, "legacy"), run_client(proxy.url, "2026-07-28")
    )
    for step, text in EXPECTED.items():
        assert legacy[step].get("text") == text, legacy[step]
        assert modern[step].get("text") == text, modern[step]
    assert legacy["_protocol_version"] == "2025-11-25"
    assert legacy["form"]["seen"] == ["elicit:form"]  # answered inline, by the legacy client's own callback
    assert legacy["roots-get-stream"]["seen"] == ["roots"]
    assert legacy["two-rounds"]["seen"] == ["elicit:form", "elicit:form"]


async def test_legacy_and_modern_clients_on_a_stdio_upstream() -> None:
    async with running_proxy(fastmcp_stdio("bridge-clients")) as proxy:
        await both_clients(proxy)
    assert stdio_children("bridge-clients") == []


async def test_legacy_and_modern_clients_on_an_sse_upstream() -> None:
    async with peers.start_fastmcp("sse") as url, running_proxy(url, transport="sse") as proxy:
        await both_clients(proxy)


# -- on the wire ---------------------------------------------------------------------------------------------


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def proxy() -> AsyncIterator[RunningProxy]:
    peers.require_peers()
    async with running_proxy(fastmcp_stdio("bridge-wire")) as running:
        yield running


async def test_initialize_answers_with_the_upstreams_result(
    proxy: RunningProxy, http: aiohttp.ClientSession
) -> None:
    client = Legacy(proxy.url, http)
    answer = await client.initialize(CAPS)
    assert answer["id"] == 0
    result = answer["result"]
    assert result["protocolVersion"] == "2025-06-18"  # the client's version, offered first
    assert result["serverInfo"]["name"] == "legacy-fastmcp-fixture"
    assert "tools" in result["capabilities"]
    assert client.session is not None and len(client.session) > 60  # sealed


async def test_session_ids_are_bound_to_the_principal(
    proxy: RunningProxy, http: aiohttp.ClientSession
) -> None:
    alice = Legacy(proxy.url, http)
    await alice.initialize()
    assert alice.session is not None
    listing = {"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {}}
    for bad in ({"Authorization": "Bearer mallory"}, {"Mcp-Session-Id": alice.session[:-4]}):
        status, body = await alice.post(listing, **bad)
        assert status == 404 and body[0]["error"]["message"] == "Session not found"
    status, body = await alice.post(listing)
    assert status == 200 and body[-1]["id"] == 7 and "tools" in body[-1]["result"]
    anonymous = Legacy(proxy.url, http, session=None)
    status, _ = await anonymous.post(listing)
    assert status == 400  # no session id, not initialize


async def test_delete_stops_the_stdio_child(http: aiohttp.ClientSession) -> None:
    async with running_proxy(fastmcp_stdio("bridge-delete")) as proxy:
        client = Legacy(proxy.url, http)
        await client.initialize()
        (child,) = stdio_children("bridge-delete")
        async with http.delete(proxy.url, headers=client.headers()) as resp:
            assert resp.status == 200
        await eventually(lambda: child not in stdio_children("bridge-delete"), "the child to exit", WAIT)
        status, body = await client.request("tools/list")
        assert status == 404 and body[0]["error"]["message"] == "Session not found"
        async with http.delete(proxy.url, headers=client.headers()) as resp:
            assert resp.status == 404


async def test_idle_sessions_are_closed(http: aiohttp.ClientSession) -> None:
    async with running_proxy(fastmcp_stdio("bridge-idle", idle_ttl_s=0.5)) as proxy:
        client = Legacy(proxy.url, http)
        await client.initialize()
        assert len(stdio_children("bridge-idle")) == 1
        await eventually(lambda: not stdio_children("bridge-idle"), "the idle child to exit", WAIT)
        status, _ = await client.request("tools/list")
        assert status == 404


async def test_a_calls_notifications_come_first_then_its_response(
    proxy: RunningProxy, http: aiohttp.ClientSession
) -> None:
    client = Legacy(proxy.url, http)
    await client.initialize()
    call = {"name": "progress_steps", "arguments": {"steps": 3}, "_meta": {"progressToken": "p1"}}
    status, messages = await client.post(
        {"jsonrpc": "2.0", "id": "mine", "method": "tools/call", "params": call}
    )
    assert status == 200
    *notes, final = messages
    assert [n["params"]["progress"] for n in notes] == [1, 2, 3]
    assert {n["params"]["progressToken"] for n in notes} == {"p1"}
    assert final["id"] == "mine" and final["result"]["content"][0]["text"] == "done:3"


async def test_a_json_only_client_gets_json(proxy: RunningProxy, http: aiohttp.ClientSession) -> None:
    client = Legacy(proxy.url, http)
    await client.initialize()
    echo = {
        "jsonrpc": "2.0",
        "id": 5,
        "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": "hi"}},
    }
    async with http.post(proxy.url, json=echo, headers=client.headers(Accept="application/json")) as resp:
        assert resp.content_type == "application/json"
        body = await resp.json()
    assert body["id"] == 5 and body["result"]["content"][0]["text"] == "hi"


async def test_cancel_reaches_the_upstream_call(proxy: RunningProxy, http: aiohttp.ClientSession) -> None:
    client = Legacy(proxy.url, http)
    await client.initialize()
    (before,) = (await client.request("tools/call", {"name": "side_effects", "arguments": {}}))[1]
    slow = {
        "jsonrpc": "2.0",
        "id": 41,
        "method": "tools/call",
        "params": {"name": "slow_count", "arguments": {"delay_s": 20}},
    }
    with capture_logs() as logs:
        running = asyncio.ensure_future(client.post(slow))
        await eventually(  # the tool is running in the child (it says so on stderr: the fixture's `_began`)
            lambda: any(
                e["event"] == "upstream.stderr" and e["line"] == "slow_count: sleeping" for e in logs
            ),
            "the child to begin slow_count",
            WAIT,
        )
    cancel = {
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": 41, "reason": "no"},
    }
    async with asyncio.timeout(WAIT):
        assert (await client.post(cancel))[0] == 202
        status, messages = await running
    assert status == 200
    (answer,) = messages  # FastMCP answers the cancelled upstream call, under the client's id
    assert answer["id"] == 41 and answer["error"]["message"] == "Request cancelled"
    async with asyncio.timeout(WAIT):  # the session takes the next call at once
        (after,) = (await client.request("tools/call", {"name": "side_effects", "arguments": {}}))[1]
    assert (
        after["result"]["content"][0]["text"] == before["result"]["content"][0]["text"]
    )  # slow_count never ran on


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def everything() -> AsyncIterator[RunningProxy]:
    upstream = UpstreamConfig(
        name="default",
        transport="stdio",
        command=str(peers.node_bin()),
        args=(str(peers.server_everything_entry()), "stdio"),
        env={"MRTR_TEST_TAG": "bridge-everything"},
    )
    async with running_proxy(upstream) as running:
        yield running


async def test_a_server_request_with_no_call_goes_to_the_get_stream(
    everything: RunningProxy, http: aiohttp.ClientSession
) -> None:
    """server-everything asks for roots ~350 ms after `initialized`, with no call in flight: the request
    waits for the client's GET stream, the client's POSTed answer reaches the server, which then has them."""
    client = Legacy(everything.url, http)
    await client.initialize({"roots": {"listChanged": True}})
    async with asyncio.timeout(WAIT):
        async with http.get(everything.url, headers=client.headers(Accept="text/event-stream")) as stream:
            assert stream.status == 200 and stream.content_type == "text/event-stream"
            ask = await next_message(stream, "roots/list")
            answer = {"jsonrpc": "2.0", "id": ask["id"], "result": {"roots": [{"uri": ROOT, "name": "b"}]}}
            assert (await client.post(answer))[0] == 202

            async def roots_applied() -> bool:  # the server takes the answer a moment after the 202
                status, messages = await client.request(
                    "tools/call", {"name": "get-roots-list", "arguments": {}}
                )
                assert status == 200
                return ROOT in messages[-1]["result"]["content"][0]["text"]

            await eventually(roots_applied, "the server to hold the answered roots")


async def test_session_wide_notifications_go_to_the_get_stream(
    proxy: RunningProxy, http: aiohttp.ClientSession
) -> None:
    client = Legacy(proxy.url, http)
    await client.initialize()
    async with asyncio.timeout(WAIT):
        async with http.get(proxy.url, headers=client.headers(Accept="text/event-stream")) as stream:
            status, messages = await client.request("tools/call", {"name": "change_tools", "arguments": {}})
            assert status == 200 and messages[-1]["result"]["content"][0]["text"] != "0"
            note = await next_message(stream, "notifications/tools/list_changed")
    assert note["params"] == {}


async def test_a_client_that_goes_away_mid_call_does_not_block_its_session(
    proxy: RunningProxy, http: aiohttp.ClientSession
) -> None:
    """Disconnecting is not cancelling: the call runs on, but the elicitation the client can no longer
    answer gets an error upstream, so the tool ends and the session takes the next call at once."""
    client = Legacy(proxy.url, http)
    await client.initialize(CAPS)
    ask = {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "ask_name", "arguments": {}}}
    async with asyncio.timeout(WAIT):
        async with (  # its own connection, closed mid-call
            aiohttp.ClientSession() as doomed,
            doomed.post(proxy.url, json=ask, headers=client.headers()) as resp,
        ):
            assert (await next_message(resp, "elicitation/create"))["params"]["message"]
        status, messages = await client.request("tools/call", {"name": "echo", "arguments": {"text": "next"}})
    assert status == 200 and messages[-1]["result"]["content"][0]["text"] == "next"
