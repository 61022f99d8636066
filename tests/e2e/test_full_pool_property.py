"""Property (issue 20, item 1): with concurrency and full pools, no request gets a server error.

The real proxy in front of FastMCP 1.30 with a pool of two sessions, over Streamable HTTP (`default`:
modern clients pooled, legacy clients relayed) and over HTTP+SSE (`bridged`: legacy clients bridged, a
dedicated upstream session each, at most two). Each example sends a batch of requests at once, from up to
five principals: lists, ping, discover, plain and eliciting tool calls (which park and hold a session),
retries with bad handles, and legacy clients (initialize, a list on the session, maybe DELETE). Whatever
the interleaving, every answer is a JSON-RPC message with a documented code (the upstream's own errors pass
through the relay as they are), and a full pool shows as -31003. The one 5xx is the designed refusal of a
new call before anything began (503 -31003 with Retry-After, so a balancer can send it to another replica:
issue 16); never a 500. The budget is fixed (`max_examples`).
A deterministic test beside it checks that such a -31003 has its request log line and its metric.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import peers
import pytest
import pytest_asyncio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from structlog.contextvars import merge_contextvars
from structlog.testing import capture_logs
from waiting import eventually

from e2e.harness import RawClient, RunningProxy, accept_name, running_proxy
from proxy.config import PoolConfig, UpstreamConfig
from proxy.wire.sse import SSEDecoder

pytestmark = [pytest.mark.peers]

DOCUMENTED = {-32600, -32601, -32602, -32020, -32022, -31001, -31002, -31003, -31004}

ACTIONS = st.sampled_from(
    [
        ("tools/list", {}),
        ("prompts/list", {}),
        ("resources/list", {}),
        ("ping", {}),
        ("server/discover", {}),
        ("tools/call", {"name": "echo", "arguments": {"text": "hi"}}),
        ("tools/call", {"name": "ask_name", "arguments": {}}),
        ("tools/call", {"name": "slow_echo", "arguments": {"text": "s", "delay_s": 0.3}}),
        ("tools/call", {"name": "ask_name", "arguments": {}, "requestState": "forged", "inputResponses": {}}),
    ]
)
LEGACY = st.tuples(st.just("legacy"), st.sampled_from(["tools/list", "ping", "tools/call"]), st.booleans())
TARGETS = st.sampled_from(["default", "bridged"])
BATCHES = st.lists(st.tuples(st.integers(0, 4), TARGETS, st.one_of(ACTIONS, LEGACY)), min_size=1, max_size=10)
LEGACY_VERSION = "2025-11-25"
Answer = tuple[int, list[dict[str, Any]], str | None]  # status, JSON-RPC messages, Retry-After
SEEN: Counter[str] = Counter()  # what the examples got, printed at the end (`-s`)


POOL = PoolConfig(max_sessions=2, acquire_timeout_s=0.2, idle_ttl_s=1)


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def upstreams() -> AsyncIterator[tuple[UpstreamConfig, UpstreamConfig]]:
    """FastMCP 1.30 over Streamable HTTP (`default`) and over HTTP+SSE (`bridged`), two sessions each."""
    async with peers.start_fastmcp() as url, peers.start_fastmcp("sse") as sse_url:
        yield (
            UpstreamConfig(name="default", url=url, pool=POOL),
            UpstreamConfig(name="bridged", url=sse_url, transport="sse", pool=POOL),
        )


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def proxy(upstreams: tuple[UpstreamConfig, UpstreamConfig]) -> AsyncIterator[RunningProxy]:
    upstream, bridged = upstreams
    # Parked calls die young here, so that later examples see a pool that frees up again.
    async with running_proxy(
        upstream, extra=(bridged,), max_calls_per_address=0, first_round_ttl_s=1
    ) as running:
        yield running
    print(f"\nfull-pool property: answers by kind {dict(SEEN)}")


def route(proxy: RunningProxy, target: str) -> str:
    return proxy.url if target == "default" else proxy.url.replace("/mcp", f"/servers/{target}/mcp")


def parsed(content_type: str, raw: bytes) -> list[dict[str, Any]]:
    """The JSON-RPC messages of an answer (JSON, or SSE events); fails on anything else."""
    if content_type == "text/event-stream":
        return [json.loads(e.data) for e in SSEDecoder().feed(raw) if e.data.strip()]
    assert content_type == "application/json", (content_type, raw[:200])
    return [json.loads(raw)]


async def legacy_client(
    http: aiohttp.ClientSession, url: str, who: int, method: str, delete: bool
) -> list[Answer]:
    """A legacy client: initialize, then `method` on its session (and DELETE it, if `delete`)."""
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "Authorization": f"Bearer user-{who}",
    }
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": LEGACY_VERSION, "capabilities": {}, "clientInfo": {"name": "p", "version": "1"}
    }}  # fmt: skip
    answers = []
    async with http.post(url, json=init, headers=headers) as r:
        answers.append((r.status, parsed(r.content_type, await r.read()), r.headers.get("Retry-After")))
        session = r.headers.get("Mcp-Session-Id")
    if session is None:
        return answers
    headers = {**headers, "Mcp-Session-Id": session, "MCP-Protocol-Version": LEGACY_VERSION}
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    async with http.post(url, json=note, headers=headers) as r:
        assert r.status == 202, (r.status, await r.text())
    params = {"name": "echo", "arguments": {"text": "l"}} if method == "tools/call" else {}
    async with http.post(
        url, json={"jsonrpc": "2.0", "id": 2, "method": method, "params": params}, headers=headers
    ) as r:
        answers.append((r.status, parsed(r.content_type, await r.read()), r.headers.get("Retry-After")))
    if delete:
        async with http.delete(url, headers=headers) as r:
            assert r.status < 500, r.status
    return answers


async def modern_request(
    proxy: RunningProxy, http: aiohttp.ClientSession, who: int, target: str, action: tuple[str, Any]
) -> list[Answer]:
    method, params = action
    reply = await RawClient(route(proxy, target), http, authorization=f"Bearer user-{who}").request(
        method, dict(params)
    )
    assert reply.body, (method, reply.status, reply.headers)  # JSON-RPC, whatever the status
    return [(reply.status, [reply.body], reply.headers.get("Retry-After"))]


@given(batch=BATCHES)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@pytest.mark.asyncio(loop_scope="session")
async def test_full_pools_never_give_a_server_error(
    proxy: RunningProxy, batch: list[tuple[int, str, Any]]
) -> None:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as http:
        answers = await asyncio.gather(
            *(
                legacy_client(http, route(proxy, target), who, action[1], action[2])
                if action[0] == "legacy"
                else modern_request(proxy, http, who, target, action)
                for who, target, action in batch
            )
        )
    for (_, target, action), exchange in zip(batch, answers, strict=True):
        for status, messages, retry_after in exchange:
            final = messages[-1]
            if status == 503:  # a new call turned away at admission: the documented refusal, nothing began
                assert action[0] == "tools/call" and final["error"]["code"] == -31003, (target, action, final)
                assert retry_after == "1"
            else:
                assert status < 500, (target, action, status, messages)
            assert final["jsonrpc"] == "2.0", final
            relayed = action[0] == "legacy" and target == "default"  # the upstream's own bytes
            if "error" in final and not relayed:
                assert final["error"]["code"] in DOCUMENTED, json.dumps(final)
            kind = "result" if "result" in final else str(final["error"]["code"])
            SEEN[f"{'legacy' if action[0] == 'legacy' else 'modern'}:{target}:{kind}"] += 1


@pytest.mark.asyncio(loop_scope="session")
async def test_a_full_pool_answers_31003_with_its_log_line_and_metric(
    upstreams: tuple[UpstreamConfig, UpstreamConfig],
) -> None:
    """One principal parks a call, another runs a slow one: both sessions held. A third principal's
    tools/list waits pool.acquire_timeout_s, then gets -31003; its request line says so and the refusal is
    counted. A proxy of its own, with the default first-round TTL: the parked call must outlive the wait
    however slow the machine (the property's proxy lets parked calls die after a second)."""
    async with (
        running_proxy(upstreams[0], max_calls_per_address=0) as proxy,
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as http,
    ):
        holder, runner = (RawClient(proxy.url, http, authorization=f"Bearer holder-{i}") for i in range(2))
        first = await holder.call("ask_name")
        assert first.result["resultType"] == "input_required"
        slow = asyncio.ensure_future(runner.call("slow_echo", {"text": "s", "delay_s": 3}))
        # The parked call and the running one: every session taken.
        await eventually(lambda: proxy.live == 2, "two calls in the registry")
        with capture_logs(processors=[merge_contextvars]) as logs:
            full = await RawClient(proxy.url, http, authorization="Bearer third").request("tools/list")
        async with http.get(proxy.url.replace("/mcp", "/metrics")) as r:
            metrics = await r.text()
        done = await holder.retry(first, {"elicit-1": accept_name()}, "ask_name")  # nothing was lost
        assert done.result["content"][0]["text"] == "accept:Alice"
        assert (await slow).result["content"][0]["text"] == "s"
    assert full.status == 200
    assert full.error["code"] == -31003 and full.error["message"].startswith("Too many calls: ")
    (line,) = [e for e in logs if e["event"] == "request"]
    assert (line["outcome"], line["refusal"], line["request_id"]) == (
        "failed:-31003", "pool_full", full.headers["X-Request-Id"]
    )  # fmt: skip
    name = 'mrtr_proxy_admission_refusals_total{reason="pool_full"}'
    refused = [m for m in metrics.splitlines() if m.startswith(name)]
    assert refused and float(refused[0].split()[-1]) >= 1
