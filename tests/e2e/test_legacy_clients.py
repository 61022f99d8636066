"""Legacy clients keep working through the proxy — on the same endpoint, at the same time as new ones.

A client that sends `initialize` gets a legacy session and the upstream's inline requests as they are; a
2026-07-28 client gets MRTR rounds. Real clients on both sides: mcp 2.3.0 in `legacy` mode and FastMCP
1.30's own client, next to mcp 2.3.0 in `2026-07-28` mode.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import peers
import pytest
import pytest_asyncio

from e2e.harness import RawClient, RunningProxy, running_proxy

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session")]

DRIVER = Path(__file__).parent / "clients" / "modern_client.py"
PLAN = [
    {"id": "form", "kind": "tool", "name": "ask_name"},
    {"id": "sampling-get-stream", "kind": "tool", "name": "sample", "args": {"prompt": "capital?"}},
    {"id": "roots-get-stream", "kind": "tool", "name": "roots"},
    {"id": "two-rounds", "kind": "tool", "name": "two_questions"},
    {"id": "prompt", "kind": "prompt", "name": "greeting_prompt"},
]
EXPECTED = {
    "form": "accept:Alice",
    "sampling-get-stream": "Paris",
    "roots-get-stream": "file:///work/project",
    "two-rounds": "accept:Alice|accept:green",
    "prompt": "Hello, Alice!",
}
FASTMCP_1_CLIENT = """
import asyncio, sys
from mcp import ClientSession, types
from mcp.client.streamable_http import streamablehttp_client

async def on_elicit(context, params):
    return types.ElicitResult(action="accept", content={"name": "Old"})

async def main(url):
    async with streamablehttp_client(url) as (read, write, _):
        async with ClientSession(read, write, elicitation_callback=on_elicit) as session:
            init = await session.initialize()
            result = await session.call_tool("ask_name", {})
            print(init.protocolVersion, result.content[0].text)

asyncio.run(main(sys.argv[1]))
"""


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def proxy(fastmcp_url: str) -> AsyncIterator[RunningProxy]:
    async with running_proxy(fastmcp_url) as running:
        yield running


async def run_client(url: str, mode: str) -> dict[str, Any]:
    argv = [str(peers.client_python()), str(DRIVER), url, json.dumps(PLAN), mode]
    run = await peers.run_once(argv, limit_s=90)
    assert run.returncode == 0 and not run.timed_out, run.stderr[-3000:]
    result: dict[str, Any] = json.loads(run.stdout)
    return result


async def test_legacy_and_modern_clients_at_the_same_time(proxy: RunningProxy) -> None:
    legacy, modern = await asyncio.gather(
        run_client(proxy.url, "legacy"), run_client(proxy.url, "2026-07-28")
    )
    for step, text in EXPECTED.items():
        assert legacy[step].get("text") == text, legacy[step]
        assert modern[step].get("text") == text, modern[step]
    assert legacy["form"]["seen"] == ["elicit:form"]  # answered inline, by the legacy client's callback


async def test_fastmcp_1_client_gets_inline_elicitation(proxy: RunningProxy, tmp_path: Path) -> None:
    script = tmp_path / "old_client.py"
    script.write_text(FASTMCP_1_CLIENT)
    run = await peers.run_once([str(peers.legacy_python()), str(script), proxy.url], limit_s=60)
    assert run.returncode == 0, run.stderr[-3000:]
    version, text = run.stdout.split()
    assert version == "2025-11-25"
    assert text == "accept:Old"


async def test_legacy_session_ids_are_sealed_and_bound(proxy: RunningProxy) -> None:
    async with aiohttp.ClientSession() as http:
        init = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "1"},
            },
        }
        headers = {
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
            "Authorization": "Bearer alice",
        }
        async with http.post(proxy.url, json=init, headers=headers) as resp:
            assert resp.status == 200
            session = resp.headers["Mcp-Session-Id"]
            await resp.read()
        assert len(session) > 60  # sealed, not the upstream's own id
        listed = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}
        as_alice = {**headers, "Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"}
        async with http.post(proxy.url, json=listed, headers=as_alice) as resp:
            assert resp.status == 200
        for bad in (
            {**as_alice, "Authorization": "Bearer mallory"},
            {**as_alice, "Mcp-Session-Id": session[:-4]},
        ):
            async with http.post(proxy.url, json=listed, headers=bad) as resp:
                assert resp.status == 404  # unknown to this principal: a legacy client re-initializes
                assert (await resp.json())["error"]["message"] == "Session not found"
        async with http.delete(proxy.url, headers=as_alice) as resp:
            assert resp.status == 200
        async with http.post(proxy.url, json=listed, headers=as_alice) as resp:
            assert resp.status == 404  # the upstream ended the session


async def test_a_modern_request_with_a_session_header_stays_modern(proxy: RunningProxy) -> None:
    async with aiohttp.ClientSession() as http:
        client = RawClient(proxy.url, http)
        body = client.body("tools/call", {"name": "echo", "arguments": {"text": "modern"}})
        reply = await client.send(body, {**client.headers(body), "Mcp-Session-Id": "ignored"})
        assert reply.result["resultType"] == "complete"


@pytest.mark.parametrize(
    "extra",
    [{}, {"MCP-Protocol-Version": "2026-07-28"}],
    ids=["version-in-params", "and-in-the-header"],
)
async def test_initialize_offering_2026_07_28_is_answered_with_a_legacy_version(
    proxy: RunningProxy, extra: dict[str, str]
) -> None:
    """The README once said 400 -32022 and the proxy answered 200. The spec decides for 200: a dual-era
    server treats `initialize` as legacy ("An `initialize` request selects legacy semantics",
    basic/versioning), and a legacy server offered a version it does not support answers with one it does
    (lifecycle, version negotiation). The client, not the server, then decides whether to go on."""
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2026-07-28",
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"},
        },
    }
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json", **extra}
    async with aiohttp.ClientSession() as http, http.post(proxy.url, json=init, headers=headers) as resp:
        assert resp.status == 200
        assert "Mcp-Session-Id" in resp.headers
        text = await resp.text()
    data = (
        next(line[5:] for line in text.splitlines() if line.startswith("data:")) if "data:" in text else text
    )
    result = json.loads(data)["result"]
    assert result["protocolVersion"] in ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
    errors = (Path(__file__).parents[2] / "docs" / "errors.md").read_text(encoding="utf-8")
    (row,) = [line for line in errors.splitlines() if line.startswith("| `initialize` offering `2026-07-28`")]
    assert row.split(" | ")[1] == "200"  # the docs' error table says what the proxy does
