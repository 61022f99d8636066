"""2026-07-28 servers run over stdio behind the proxy (proxy/upstream/modern_stdio.py): FastMCP 4.2.3 (two
eras, `mcp.run(transport="stdio")`) and the mcp 2.3.0 SDK's own stdio server, modern only. The era is
probed on the upstream's own 2026-07-28 child (`server/discover` first); a 2026-07-28 client's requests are
relayed natively over that one child (mcp 2.3.0's Client), a legacy client (mcp 1.30) is served by the
mirror; /readyz shows the era; a child killed mid-call fails that call with a clear error and the next
call runs on a fresh child."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import aiohttp
import peers
import pytest
import pytest_asyncio
from waiting import eventually

from e2e.harness import RawClient, RunningProxy, accept_name, running_proxy
from e2e.test_mirror import NATIVE, python_client, texts
from e2e.test_modern_upstream_clients import COMMON, COMMON_EXPECTED, py_client
from e2e.test_probe import report, verdict
from proxy.config import UpstreamConfig
from proxy.handle.relay_state import open_relay_state
from proxy.process.appstate import CODEC, ERAS, MIRROR
from proxy.upstream.era import EraBook

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session")]


def stdio_upstream(kind: str, era: str = "auto") -> UpstreamConfig:
    if kind == "fastmcp4":
        python, script = peers.fastmcp4_python(), peers.fastmcp4_script()
    else:
        python, script = peers.client_python(), peers.mcp2_server_script()
    return UpstreamConfig(
        name="default",
        command=str(python),
        args=(str(script), "--stdio"),
        transport="stdio",
        era=era,  # type: ignore[arg-type]
    )


@pytest_asyncio.fixture(loop_scope="session", params=["fastmcp4", "mcp2"])
async def proxied(request: pytest.FixtureRequest) -> AsyncIterator[tuple[str, RunningProxy]]:
    async with running_proxy(stdio_upstream(request.param)) as proxy:
        yield request.param, proxy


def children_of(proxy: RunningProxy) -> Any:
    eras: EraBook = proxy.app[ERAS]
    return eras._children


async def test_mcp_2_3_client_at_2026_is_relayed_natively_over_one_child(
    proxied: tuple[str, RunningProxy],
) -> None:
    _, proxy = proxied
    out = await py_client(proxy.url, COMMON, "2026-07-28")
    assert out.pop("_protocol_version") == "2026-07-28"
    for step, text in COMMON_EXPECTED.items():
        assert out[step].get("text") == text and not out[step].get("is_error"), (step, out[step])
    # Progress across both rounds, under the client's own progressToken each round.
    assert [p[:2] for p in out["progress"]["progress"]] == [[1, 4], [2, 4], [3, 4], [4, 4]]
    assert proxy.app[ERAS].describe() == {"default": "modern"}
    assert proxy.parked == 0 and proxy.live == 0  # nothing of a relayed call lives in the proxy
    child = children_of(proxy).child("default")
    assert child is not None and child.alive and child.in_flight == 0  # one child served every request


async def test_many_requests_in_flight_on_the_one_child_each_get_their_answer(
    proxied: tuple[str, RunningProxy],
) -> None:
    _, proxy = proxied
    async with aiohttp.ClientSession() as http:
        client = RawClient(proxy.url, http)
        replies = await asyncio.gather(*(client.call("echo", {"text": f"n{i}"}) for i in range(12)))
        assert [r.result["content"][0]["text"] for r in replies] == [f"n{i}" for i in range(12)]
        first = await client.call("guard_two")
        assert first.result["resultType"] == "input_required" and first.result["requestState"]
        second = await client.retry(first, {"first": accept_name("X")}, "guard_two")
        done = await client.retry(second, {"second": accept_name("Y")}, "guard_two")
        assert done.result["content"][0]["text"] == "two:X+Y"


async def test_mcp_1_30_client_uses_native_tools_through_the_mirror(
    proxied: tuple[str, RunningProxy],
) -> None:
    kind, proxy = proxied
    out = await python_client("mcp", proxy.url, NATIVE)
    assert out["protocolVersion"] == "2025-11-25"
    assert out["server"] == f"{kind}-fixture"
    got, steps = texts(out), out["steps"]
    assert got["one"] == "hello:Ada" and steps["one"]["seen"] == ["elicit:form"]
    assert got["two"] == "two:Ada+Ada" and steps["two"]["seen"] == ["elicit:form", "elicit:form"]
    assert got["progress"] == "progress:Ada"
    assert steps["progress"]["progress"] == [[1, 4], [2, 4], [3, 4], [4, 4]]
    assert (got["declined"], got["cancelled"], got["echo"]) == ("declined", "cancelled", "plain")
    assert len(proxy.app[MIRROR].calls) == 0


async def test_readyz_shows_the_stdio_upstreams_era(proxied: tuple[str, RunningProxy]) -> None:
    _, proxy = proxied
    base = proxy.url.removesuffix("/mcp")
    async with aiohttp.ClientSession() as http:

        async def probed() -> dict[str, Any] | None:  # the probe starts the child: /readyz does not wait
            async with http.get(f"{base}/readyz") as resp:
                ready: dict[str, Any] = await resp.json()
            return ready if ready["upstream_eras"] == {"default": "modern"} else None

        await eventually(probed, "/readyz to show the upstream modern", every_s=0.25)
        async with http.get(f"{base}/readyz") as resp:
            ready = await resp.json()
        assert resp.status == 200 and ready["upstreams"] == {"default": "reachable"}, ready
        async with http.get(f"{base}/metrics") as resp:
            metrics = await resp.text()
        assert 'mrtr_proxy_upstream_era{era="modern",upstream="default"} 1' in metrics


async def test_a_child_killed_mid_call_fails_the_call_clearly_and_the_next_call_works() -> None:
    async with running_proxy(stdio_upstream("fastmcp4")) as proxy, aiohttp.ClientSession() as http:
        client = RawClient(proxy.url, http)
        assert (await client.call("echo", {"text": "up"})).result["content"][0]["text"] == "up"
        child = children_of(proxy).child("default")
        pid = child.pid
        slow = asyncio.ensure_future(client.call("slow", {"seconds": 30}))
        await eventually(lambda: child.in_flight, "the call to be on the child")
        os.kill(pid, signal.SIGKILL)
        failed = await asyncio.wait_for(slow, 30)
        assert failed.error["code"] == -31001, failed.body
        # What a legacy upstream's call says when its child dies: it ran, it was not re-run.
        said = "Upstream failed during the call (upstream process was killed by SIGKILL); it was not re-run"
        assert failed.error["message"] == said, failed.error
        again = await client.call("echo", {"text": "again"})
        assert again.result["content"][0]["text"] == "again"
        fresh = children_of(proxy).child("default")
        assert fresh.pid != pid and fresh.alive
        assert proxy.app[ERAS].describe() == {"default": "modern"}  # probed again on the fresh child


async def test_a_modern_only_stdio_server_with_era_modern_is_used_without_a_probe() -> None:
    async with running_proxy(stdio_upstream("mcp2", era="modern")) as proxy, aiohttp.ClientSession() as http:
        client = RawClient(proxy.url, http)
        first = await client.call("guard_name")
        assert first.result["inputRequests"]["name"]["method"] == "elicitation/create"
        done = await client.call("guard_name", inputResponses={"name": accept_name("M")})
        assert done.result["content"][0]["text"] == "hello:M"
        assert proxy.app[ERAS].probes == 0


async def test_a_legacy_stdio_server_is_probed_and_served_as_before() -> None:
    """FastMCP 1.30 over stdio answers the probe's server/discover with an error: legacy, and the probe's
    child is stopped (legacy sessions run children of their own)."""
    up = UpstreamConfig(
        name="default",
        command=str(peers.legacy_python()),
        args=(str(peers.legacy_fastmcp_script()), "--transport", "stdio"),
        transport="stdio",
    )
    async with running_proxy(up) as proxy, aiohttp.ClientSession() as http:
        client = RawClient(proxy.url, http)
        assert (await client.call("echo", {"text": "old"})).result["content"][0]["text"] == "old"
        assert proxy.app[ERAS].describe() == {"default": "legacy"}
        assert children_of(proxy).child("default") is None


@pytest.mark.parametrize("kind", ["fastmcp4", "mcp2"])
async def test_probe_sends_server_discover_first_over_stdio(kind: str) -> None:
    up = stdio_upstream(kind)
    assert up.command is not None
    out = await report(up.command, *up.args, extra=("--call", "guard_name", "--"))
    assert out["modern"]["era"] == "modern" and out["modern"]["versions"] == ["2026-07-28"], out["modern"]
    assert {"echo", "guard_name", "guard_two"} <= set(out["modern"]["tools"])
    assert out["modern"]["call"]["outcome"] == "input_required"
    assert verdict(out, "2026-07-28 clients")[0] == "works"
    assert "over stdio" in verdict(out, "fronting")[1]
    if kind == "mcp2":  # modern only: its initialize is refused
        assert out["negotiated"] is None and out["transports"]["legacy_initialize"]["answer"] == "no", out
    else:  # two eras: its legacy side is probed too
        assert out["negotiated"] == "2025-11-25"


async def test_subscriptions_listen_over_stdio_gets_its_own_notifications() -> None:
    """The mcp 2.3.0 server's listen stream over the shared child: its acknowledgement and a tools
    list_changed reach the listening client, under the client's own subscription id, while other requests
    go on on the same child."""
    async with running_proxy(stdio_upstream("mcp2")) as proxy, aiohttp.ClientSession() as http:
        client = RawClient(proxy.url, http)
        body = client.body("subscriptions/listen", {"notifications": {"toolsListChanged": True}})
        async with http.post(proxy.url, json=body, headers=client.headers(body)) as resp:
            assert resp.status == 200 and resp.content_type == "text/event-stream"
            seen: list[dict[str, Any]] = []

            async def until(method: str) -> None:
                while not any(m.get("method") == method for m in seen):
                    chunk = await resp.content.readuntil(b"\n\n")
                    assert chunk, "the stream ended"
                    for line in chunk.decode().splitlines():
                        if line.startswith("data:") and line[5:].strip():
                            seen.append(json.loads(line[5:]))

            async with asyncio.timeout(30):
                await until("notifications/subscriptions/acknowledged")
                added = await client.call("add_tool", {"name": "fresh"})
                assert not added.result.get("isError"), added.body
                await until("notifications/tools/list_changed")
        subs = {m["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] for m in seen}
        assert subs == {body["id"]}, seen


async def test_the_childs_request_state_is_bound_to_the_principal() -> None:
    """One child serves every user and no credential reaches it: its requestState would be a bearer token.
    The proxy wraps it in its own handle bound to the principal; replayed by another user it is refused."""
    async with running_proxy(stdio_upstream("fastmcp4")) as proxy, aiohttp.ClientSession() as http:
        alice = RawClient(proxy.url, http, authorization="Bearer alice")
        mallory = RawClient(proxy.url, http, authorization="Bearer mallory")
        first = await alice.call("guard_two")
        wrapped = first.result["requestState"]
        inner = open_relay_state(proxy.app[CODEC], wrapped, time.time())  # the proxy's handle (format 4)
        assert inner.state.startswith("v1.") and inner.state not in wrapped  # the server's, sealed inside
        answers = {"first": accept_name("X")}
        replayed = await mallory.call("guard_two", inputResponses=answers, requestState=wrapped)
        assert replayed.error == {"code": -32602, "message": "Invalid requestState"}
        second = await alice.retry(first, answers, "guard_two")
        done = await alice.retry(second, {"second": accept_name("Y")}, "guard_two")
        assert done.result["content"][0]["text"] == "two:X+Y"


async def test_legacy_tools_of_a_two_era_stdio_server_run_on_a_legacy_child() -> None:
    """FastMCP 4.2.3 refuses ctx.elicit on a 2026-07-28 request; named in legacy_tools, such a tool runs on
    a legacy session (a child of its own, with its initialize) and parks in the proxy, while the native
    tools go on on the shared 2026-07-28 child."""
    upstream = replace(stdio_upstream("fastmcp4"), legacy_tools=("ask_name",))
    async with running_proxy(upstream) as proxy, aiohttp.ClientSession() as http:
        client = RawClient(proxy.url, http)
        first = await client.call("ask_name")
        assert first.result["resultType"] == "input_required" and proxy.parked == 1  # the proxy's round
        (key,) = first.result["inputRequests"]
        done = await client.retry(first, {key: {"action": "accept", "content": {"value": "Ada"}}}, "ask_name")
        assert done.result["content"][0]["text"] == "accept:Ada"
        native = await client.call("guard_name")
        assert native.result["inputRequests"]["name"]["method"] == "elicitation/create"
        assert proxy.app[ERAS].describe() == {"default": "modern"}
