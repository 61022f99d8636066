"""Per-tool paths for two-era upstreams (issue 43; upstream/tool_paths.py), against real two-era servers —
FastMCP 4.2.3 and tmcp 1.20.0 — with the default configuration (no `legacy_tools`), each flow compared with
the same client going direct.

- a 2026-07-28 client (mcp 2.3.0): an inline-asking tool (`ask_name`) is refused at 2026-07-28 going direct;
  through the proxy its first call is refused the same way, plus the proxy's one-line hint, and never re-run;
  the next call goes the legacy way and works. /readyz and /metrics list the learned tool.
- a legacy client: going direct, the inline-asking tool works and a native one (`guard_name` on FastMCP 4)
  fails; through the proxy both work (the native one sent again at 2026-07-28 after the legacy refusal).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import aiohttp
import peers
import pytest

from e2e.harness import RawClient, running_proxy
from e2e.test_mirror import ELICIT, RawLegacy
from proxy.config import UpstreamConfig
from proxy.process.appstate import ERAS
from proxy.upstream.tool_paths import HINT

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session"), pytest.mark.timeout(240)]

PY_DRIVER = Path(__file__).parent / "clients" / "modern_client.py"
SERVERS: dict[str, Callable[[], AbstractAsyncContextManager[str]]] = {
    "fastmcp4": peers.start_fastmcp4,
    "tmcp": peers.start_tmcp,
}
# What each server answers a 2026-07-28 call of its inline-asking tool (going direct, and the first call
# through the proxy).
REFUSAL = {
    "fastmcp4": "elicitation via server-initiated requests is unavailable on 2026-07-28 connections",
    "tmcp": "not marked as replayable",
}


async def modern_client(url: str, plan: list[dict[str, Any]]) -> dict[str, Any]:
    argv = [str(peers.client_python()), str(PY_DRIVER), url, json.dumps(plan), "2026-07-28"]
    run = await peers.run_once(argv, limit_s=120)
    assert run.returncode == 0 and not run.timed_out, run.stderr[-3000:]
    out: dict[str, Any] = json.loads(run.stdout)
    return out


def said(step: dict[str, Any]) -> str:
    return str(step.get("text", step.get("error", "")))


def works(step: dict[str, Any], want: str) -> bool:
    return "error" not in step and not step.get("is_error") and said(step).startswith(want)


PLAN = [
    {"id": "first", "kind": "tool", "name": "ask_name"},
    {"id": "again", "kind": "tool", "name": "ask_name"},
    {"id": "native", "kind": "tool", "name": "guard_name"},
    {"id": "plain", "kind": "tool", "name": "echo", "args": {"text": "hi"}},
]


@pytest.mark.parametrize("server", sorted(SERVERS))
async def test_a_2026_client_learns_an_inline_tool_and_its_next_call_works(server: str) -> None:
    async with SERVERS[server]() as url:
        direct = await modern_client(url, PLAN)
        async with running_proxy(UpstreamConfig(name="default", url=url)) as proxy:
            proxied = await modern_client(proxy.url, PLAN)
            assert proxy.app[ERAS].describe() == {"default": "both"}
            async with aiohttp.ClientSession() as http:
                async with http.get(proxy.url.removesuffix("/mcp") + "/readyz") as resp:
                    ready = await resp.json()
                async with http.get(proxy.url.removesuffix("/mcp") + "/metrics") as resp:
                    metrics = await resp.text()
    # Going direct: the inline-asking tool is refused every time; the native and plain tools work.
    assert REFUSAL[server] in said(direct["first"]) and REFUSAL[server] in said(direct["again"])
    assert works(direct["native"], "hello:Alice") and works(direct["plain"], "hi")
    # Through the proxy: the first call is refused as direct (never re-run), with the hint; the next works.
    assert REFUSAL[server] in said(proxied["first"]) and HINT in said(proxied["first"]), proxied["first"]
    assert works(proxied["again"], "accept:"), proxied["again"]
    assert works(proxied["native"], "hello:Alice") and works(proxied["plain"], "hi")
    assert ready["learned_tools"] == {"default": {"legacy": ["ask_name"], "native": []}}
    assert 'mrtr_proxy_learned_tool{path="legacy",tool="ask_name",upstream="default"} 1.0' in metrics


async def test_learn_legacy_tools_off_passes_the_refusal_on_as_it_is() -> None:
    async with (
        peers.start_fastmcp4() as url,
        running_proxy(UpstreamConfig(name="default", url=url, learn_legacy_tools=False)) as proxy,
    ):
        proxied = await modern_client(proxy.url, PLAN[:2])
        assert proxy.app[ERAS].paths.learned() == {}
    for step in ("first", "again"):
        assert said(proxied[step]) == REFUSAL["fastmcp4"] + ".", proxied[step]


def fill(asked: dict[str, Any]) -> dict[str, Any]:
    (field,) = asked["params"]["requestedSchema"]["properties"]
    return {"action": "accept", "content": {field: "Ada"}}


async def legacy_flows(
    url: str, tools: tuple[str, ...] = ("ask_name", "guard_name", "echo")
) -> dict[str, str]:
    """A raw legacy client's answers: the inline-asking tool, the native one, a plain one."""
    async with aiohttp.ClientSession() as http:
        client = RawLegacy(url, http)
        await client.initialize(ELICIT)
        out: dict[str, str] = {}
        for name, args in (("ask_name", {}), ("guard_name", {}), ("echo", {"text": "hi"})):
            _, messages = await client.call(name, fill, arguments=args)
            final = messages[-1]
            result = final.get("result") or {}
            text = " ".join(str(c.get("text")) for c in result.get("content") or [])
            out[name] = text if result and not result.get("isError") else f"failed: {final}"
        return out


@pytest.mark.parametrize("server", sorted(SERVERS))
async def test_a_legacy_client_gets_every_flow_direct_gives_and_the_native_tools(server: str) -> None:
    async with SERVERS[server]() as url:
        direct = await legacy_flows(url)
        async with running_proxy(UpstreamConfig(name="default", url=url)) as proxy:
            proxied = await legacy_flows(proxy.url)
            again = await legacy_flows(proxy.url)  # the native tool remembered: straight at 2026-07-28
            learned = proxy.app[ERAS].paths.learned()
            assert proxy.parked == 0
    assert direct["ask_name"] == "accept:Ada" and direct["echo"] == "hi"
    for flows in (proxied, again):
        assert flows == {"ask_name": "accept:Ada", "guard_name": "hello:Ada", "echo": "hi"}, flows
    if (
        server == "fastmcp4"
    ):  # going direct its native tool refuses a legacy session; through the proxy it works
        assert direct["guard_name"].startswith("failed:"), direct
        assert learned == {"default": {"legacy": [], "native": ["guard_name"]}}
    else:  # tmcp's replayable tool asks inline on a legacy session: nothing to learn
        assert direct["guard_name"] == "hello:Ada"
        assert learned == {}


async def test_upgrade_and_downgrade_in_place_with_a_new_principal_per_request() -> None:
    """FastMCP 1.30 replaced on its port by FastMCP 4.2.3 (two eras), then back, while 2026-07-28 clients
    call — each request from a new principal, so no pooled session dies to tell of the swap. The first new
    session's initialize shows another server (the cheap signal, upstream/pool.py): the era is probed again
    at the next request. No request fails; the era follows within one request each way."""
    port = peers.free_port()
    n = iter(range(1000))

    async def call(http: aiohttp.ClientSession, proxy_url: str, tool: str, **args: Any) -> str:
        client = RawClient(proxy_url, http, authorization=f"Bearer user{next(n)}")
        reply = await client.call(tool, args)
        assert "result" in reply.body, reply.body
        return str(reply.result["content"][0]["text"])

    async with running_proxy(f"http://127.0.0.1:{port}/mcp") as proxy, aiohttp.ClientSession() as http:
        eras = proxy.app[ERAS]
        async with peers.start_fastmcp(port=port):
            assert await call(http, proxy.url, "echo", text="legacy") == "legacy"
            assert eras.describe() == {"default": "legacy"}
        async with peers.start_fastmcp4(port=port):
            assert await call(http, proxy.url, "echo", text="up") == "up"  # served the legacy way
            assert await call(http, proxy.url, "echo", text="up2") == "up2"  # probed again: two eras
            assert eras.describe() == {"default": "both"}
            first = await RawClient(proxy.url, http, authorization="Bearer native").call("guard_name")
            assert first.result["resultType"] == "input_required"  # the server's own, natively
        async with peers.start_fastmcp(port=port):
            assert await call(http, proxy.url, "echo", text="down") == "down"  # NotModern: the legacy way
            assert eras.describe() == {"default": "legacy"}
            assert await call(http, proxy.url, "echo", text="down2") == "down2"


async def test_a_legacy_style_sampling_tool_is_learned_too() -> None:
    """FastMCP 4.2.3's `ctx.session.create_message` at 2026-07-28: "Cannot send 'sampling/createMessage'…"
    going direct; through the proxy the same refusal with the hint, then the legacy way (the client
    samples)."""
    plan = [
        {"id": f"s{i}", "kind": "tool", "name": "summarize", "args": {"text": "capital?"}} for i in (1, 2)
    ]
    async with peers.start_fastmcp4() as url:
        direct = await modern_client(url, plan)
        async with running_proxy(UpstreamConfig(name="default", url=url)) as proxy:
            proxied = await modern_client(proxy.url, plan)
            assert proxy.app[ERAS].paths.learned() == {"default": {"legacy": ["summarize"], "native": []}}
    refusal = "Cannot send 'sampling/createMessage'"
    assert refusal in said(direct["s1"]) and refusal in said(direct["s2"])
    assert refusal in said(proxied["s1"]) and HINT in said(proxied["s1"])
    assert works(proxied["s2"], "summary:"), proxied["s2"]


async def test_a_legacy_only_arcade_server_stays_legacy_for_both_client_eras() -> None:
    """arcade-mcp-server 1.32.1 answers server/discover with -32600 "Unsupported protocol version": legacy,
    not two eras (no initialize check is made). Its inline-asking tool (arcade names it
    `ArcadeFixture_AskName`) works for a 2026-07-28 client (the proxy's MRTR); a legacy client is relayed
    (a plain call here), nothing learned."""
    ask, echo = "ArcadeFixture_AskName", "ArcadeFixture_Echo"
    plan = [
        {"id": "ask", "kind": "tool", "name": ask},
        {"id": "plain", "kind": "tool", "name": echo, "args": {"text": "hi"}},
    ]
    async with peers.start_arcade() as url, running_proxy(UpstreamConfig(name="default", url=url)) as proxy:
        modern = await modern_client(proxy.url, plan)
        async with aiohttp.ClientSession() as http:
            client = RawLegacy(proxy.url, http)
            await client.initialize(ELICIT)
            initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}  # arcade insists on it
            async with http.post(proxy.url, json=initialized, headers=client.headers) as resp:
                assert resp.status == 202
            _, echoed = await client.call(echo, arguments={"text": "hi"})
        assert proxy.app[ERAS].describe() == {"default": "legacy"}
        assert proxy.app[ERAS].paths.learned() == {}
    assert works(modern["ask"], "accept:Alice") and works(modern["plain"], "hi"), modern
    assert echoed[-1]["result"]["content"][0]["text"] == "hi"
