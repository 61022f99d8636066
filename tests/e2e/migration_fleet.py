"""A mixed fleet behind the proxy and a mixed client population, for the migration report's tests.

Five upstreams over three real servers: `legacy` (FastMCP 1.30), `twoera` (FastMCP 4.2.3, two eras, its
`ctx.elicit` tool `ask_name` in `legacy_tools`), and three names for one 2026-07-28-only mcp 2.3.0 server
(`modern`, `memory`, `quiet`). `drive` sends one fixed traffic plan through one replica with 2026-07-28
clients (RawClient) and legacy clients (RawLegacy, each with its own `clientInfo.name`); `EXPECTED` is what
that plan must show in the report, per upstream and tool, by path (calls, asked) — and `VERDICTS` the
verdicts it must give.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import aiohttp
from aiohttp.test_utils import TestServer

from e2e.harness import RawClient, RunningProxy, running_proxy
from e2e.test_mirror import RawLegacy
from proxy.config import MigrationConfig, UpstreamConfig
from proxy.process.admin import admin_app

TOKEN = "migration-admin-token-0123456789"
ELICIT = {"elicitation": {}}
MIGRATION = MigrationConfig(min_calls=4)  # quiet stays under it on three replicas, memory over it on one

# upstream -> tool -> (calls by path, asked by path); paths: adapted, relayed, mirrored, passthrough
EXPECTED: dict[str, dict[str, tuple[tuple[int, int, int, int], tuple[int, int, int, int]]]] = {
    "legacy": {
        "echo": ((3, 0, 0, 2), (0, 0, 0, 0)),
        "ask_name": ((2, 0, 0, 0), (2, 0, 0, 0)),
        "(other)": ((0, 0, 0, 1), (0, 0, 0, 0)),  # a tool the server never listed
    },
    "twoera": {
        "echo": ((0, 2, 1, 0), (0, 0, 0, 0)),
        "guard_name": ((0, 1, 0, 0), (0, 1, 0, 0)),
        "ask_name": ((1, 0, 1, 0), (1, 0, 1, 0)),  # legacy_tools: a legacy client's too asks inline
        "summarize": ((0, 1, 0, 0), (0, 0, 0, 0)),  # refused at 2026-07-28 (it samples inline): learned
    },
    "modern": {
        "echo": ((0, 4, 2, 0), (0, 0, 0, 0)),
        "guard_name": ((0, 1, 1, 0), (0, 1, 1, 0)),
    },
    "memory": {"echo": ((0, 4, 0, 0), (0, 0, 0, 0))},
    "quiet": {"echo": ((0, 1, 0, 0), (0, 0, 0, 0))},
}
LEGACY_CLIENTS = {"legacy": {"legacy-cli": 1}, "twoera": {"old-desktop": 1}, "modern": {"legacy-ide": 1}}
ERAS = {"legacy": "legacy", "twoera": "both", "modern": "modern", "memory": "modern", "quiet": "modern"}
PARKED = {"legacy": 1}  # the second ask_name is never answered: parked until its deadline
STATES = {
    "legacy": "needs_proxy",
    "twoera": "needs_proxy",
    "modern": "legacy_clients",
    "memory": "ready",
    "quiet": "too_little_traffic",
}


def verdict_texts(seen: str, ago: dict[str, str], times: int) -> dict[str, str]:
    """The verdicts the plan sent `times` must give, `seen` the window in words, `ago` each asking
    upstream's last ask."""
    quiet = "1 call" if times == 1 else f"{times} calls"
    return {
        "legacy": f"needs the proxy: tool ask_name still asks inline (last {ago['legacy']})",
        "twoera": f"needs the proxy: tool ask_name still asks inline (last {ago['twoera']})",
        "modern": "needs the proxy for legacy clients only: 38 % of calls come from legacy clients "
        "(top client names: legacy-ide)",
        "memory": f"ready to be served directly: for {seen} no tool asked inline and no legacy client "
        "called it",
        "quiet": f"too little traffic to say: {quiet} in {seen} (at least 4 needed)",
    }


@dataclass
class Replica:
    proxy: RunningProxy
    admin: str  # the admin listener's base URL

    def mcp(self, upstream: str) -> str:
        return self.proxy.url.removesuffix("/mcp") + f"/servers/{upstream}/mcp"


@contextlib.asynccontextmanager
async def replica(legacy_url: str, fastmcp4_url: str, mcp2_url: str) -> AsyncIterator[Replica]:
    """One proxy in front of the fleet, with its admin routes on a listener of their own."""
    extra = (
        UpstreamConfig(name="twoera", url=fastmcp4_url, legacy_tools=("ask_name",)),
        *(UpstreamConfig(name=n, url=mcp2_url) for n in ("modern", "memory", "quiet")),
    )
    async with running_proxy(legacy_url, names=("legacy",), extra=extra, migration=MIGRATION) as proxy:
        admin = TestServer(admin_app(proxy.app, TOKEN), host="127.0.0.1")
        await admin.start_server()
        try:
            yield Replica(proxy, str(admin.make_url("")).rstrip("/"))
        finally:
            await admin.close()


def _answer(asked: dict[str, Any]) -> dict[str, Any]:
    """Accept any one-field form with "Ada" (each server names its field itself)."""
    params = asked.get("params", asked)
    (field,) = params["requestedSchema"]["properties"]
    return {"action": "accept", "content": {field: "Ada"}}


async def _legacy(http: aiohttp.ClientSession, url: str, name: str) -> RawLegacy:
    client = RawLegacy(url, http)
    body = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": ELICIT, "clientInfo": {"name": name}},
    }
    async with http.post(url, json=body, headers=client.headers) as resp:
        assert resp.status == 200, await resp.text()
        client.headers["Mcp-Session-Id"] = resp.headers["Mcp-Session-Id"]
        await resp.read()
    return client


async def _echo(client: RawClient, times: int) -> None:
    for i in range(times):
        reply = await client.call("echo", {"text": f"hi {i}"})
        assert reply.result.get("resultType") == "complete", reply


async def drive(r: Replica) -> None:
    """The traffic plan `EXPECTED` describes, through replica `r`."""
    async with aiohttp.ClientSession() as http:
        # legacy (FastMCP 1.30): 2026-07-28 clients, adapted; legacy clients, passed through
        modern = RawClient(r.mcp("legacy"), http)
        assert (await modern.request("tools/list")).status == 200
        await _echo(modern, 3)
        first = await modern.call("ask_name")
        assert first.result["resultType"] == "input_required", first
        ((key, asked),) = first.result["inputRequests"].items()
        done = await modern.retry(first, {key: _answer(asked)}, "ask_name")  # a retry: not a new call
        assert done.result["resultType"] == "complete", done
        parked = await modern.call("ask_name")  # left parked
        assert parked.result["resultType"] == "input_required", parked
        old = await _legacy(http, r.mcp("legacy"), "legacy-cli")
        for _ in range(2):
            status, _messages = await old.call("echo", arguments={"text": "old"})
            assert status == 200
        status, _messages = await old.call("no_such_tool")
        assert status == 200
        # twoera (FastMCP 4.2.3): native tools relayed, its ctx.elicit tool adapted, a legacy client mirrored
        modern = RawClient(r.mcp("twoera"), http)
        assert (await modern.request("tools/list")).status == 200
        await _echo(modern, 2)
        native = await modern.call("guard_name")
        assert native.result["resultType"] == "input_required", native
        inline = await modern.call("ask_name")
        assert inline.result["resultType"] == "input_required", inline
        ((key, asked),) = inline.result["inputRequests"].items()
        done = await modern.retry(inline, {key: _answer(asked)}, "ask_name")
        assert done.result["resultType"] == "complete", done
        old = await _legacy(http, r.mcp("twoera"), "old-desktop")
        status, _messages = await old.call("echo", arguments={"text": "old"})
        assert status == 200
        status, messages = await old.call("ask_name", _answer)  # through the mirror to a legacy session
        assert status == 200 and messages[0]["method"] == "elicitation/create", messages
        assert "Ada" in messages[-1]["result"]["content"][0]["text"], messages
        # its sampling tool refuses to ask at 2026-07-28: relayed with the hint, and learned as legacy
        learned = await modern.call("summarize", {"text": "a long text"})
        assert learned.result.get("isError") is True, learned
        # modern (mcp 2.3.0, 2026-07-28 only): relayed, and mirrored for a legacy client
        modern = RawClient(r.mcp("modern"), http)
        assert (await modern.request("tools/list")).status == 200
        await _echo(modern, 4)
        native = await modern.call("guard_name")
        assert native.result["resultType"] == "input_required", native
        old = await _legacy(http, r.mcp("modern"), "legacy-ide")
        for _ in range(2):
            status, _messages = await old.call("echo", arguments={"text": "old"})
            assert status == 200
        status, messages = await old.call("guard_name", _answer)  # asked natively, inline to the client
        assert status == 200 and messages[0]["method"] == "elicitation/create", messages
        assert "Ada" in messages[-1]["result"]["content"][0]["text"], messages
        # memory: fully native; quiet: one call
        for name, times in (("memory", 4), ("quiet", 1)):
            modern = RawClient(r.mcp(name), http)
            assert (await modern.request("tools/list")).status == 200
            await _echo(modern, times)


async def report(http: aiohttp.ClientSession, admin: str) -> dict[str, Any]:
    async with http.get(f"{admin}/admin/migration", headers={"Authorization": f"Bearer {TOKEN}"}) as resp:
        assert resp.status == 200, await resp.text()
        body: dict[str, Any] = await resp.json()
        return body
