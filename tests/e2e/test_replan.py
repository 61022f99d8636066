"""A job that finds the upstream's era wrong before anything was processed: planned once more (front/plan.py,
`WrongEra`, `Planner.again`), never handed back.

The mirror side: the proxy holds the verdict `modern` for an upstream (the mcp 2.3.0 server), which is
replaced on its port by a legacy server (FastMCP 1.30). A legacy client's `initialize` is planned to the
mirror, whose `server/discover` is answered the legacy way: the era is asked again (legacy) and the same
`initialize` is passed through to the legacy server, the session works. (The modern side — a relayed
request answered the legacy way, adapted — is tests/e2e/test_modern_upstream.py's
`test_a_modern_upstream_replaced_by_a_legacy_one_is_found_out_at_the_next_request`.)
"""

from __future__ import annotations

import json

import aiohttp
import peers
import pytest

from e2e.harness import RawClient, running_proxy
from proxy.process.appstate import ERAS

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session")]

LEGACY = "2025-11-25"
ACCEPT = "application/json, text/event-stream"


async def test_a_legacy_initialize_planned_to_the_mirror_is_planned_again_to_the_relay() -> None:
    port = peers.free_port()
    async with running_proxy(f"http://127.0.0.1:{port}/mcp") as proxy, aiohttp.ClientSession() as http:
        async with peers.start_mcp2_server(port=port):
            assert (await RawClient(proxy.url, http).call("echo", {"text": "m"})).result["content"][0][
                "text"
            ] == "m"
            assert proxy.app[ERAS].describe() == {"default": "modern"}
        async with peers.start_fastmcp(port=port):
            params = {
                "protocolVersion": LEGACY,
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            }
            body = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}
            async with http.post(proxy.url, json=body, headers={"Accept": ACCEPT}) as resp:
                text = await resp.text()
                assert resp.status == 200, text
                sid = resp.headers["Mcp-Session-Id"]
            assert '"legacy-fastmcp-fixture"' in text, text  # the legacy server's own answer, passed through
            assert proxy.app[ERAS].describe() == {"default": "legacy"}
            headers = {"Accept": ACCEPT, "Mcp-Session-Id": sid, "MCP-Protocol-Version": LEGACY}
            note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            async with http.post(proxy.url, json=note, headers=headers) as resp:
                assert resp.status == 202
            call = {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {"name": "echo", "arguments": {"text": "l"}},
            }
            async with http.post(proxy.url, json=call, headers=headers) as resp:
                raw = await resp.text()
                assert resp.status == 200, raw
            datas = [line[5:].strip() for line in raw.splitlines() if line.startswith("data:")] or [raw]
            answer = json.loads(datas[-1])
            assert answer["result"]["content"][0]["text"] == "l", answer
