"""A stdio upstream's children are bounded per machine and per principal by default (issue 29, item 9), on
the real proxy in front of FastMCP 1.30 over stdio, configured through the real loader (so the stdio
defaults apply: pool.max_sessions 32, pool.max_sessions_per_principal 4).

Before: pool.max_sessions 1024 (about 55 GB of FastMCP children) and 64 legacy sessions per principal; one
client opened 60 children. Now one principal holds 4, and the refusal names the key to raise.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import peers
import pytest
import pytest_asyncio

from e2e.harness import RawClient, running_proxy
from e2e.test_transport_stdio import stdio_children
from proxy.config import UpstreamConfig, load_config

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session")]

TRIES = 8
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {"elicitation": {}},
        "clientInfo": {"name": "flood", "version": "1"},
    },
}


def stdio_upstream(tmp: Path, tag: str) -> UpstreamConfig:
    yaml = f"""
upstreams:
  - name: default
    command: {json.dumps(str(peers.legacy_python()))}
    args: [{json.dumps(str(peers.legacy_fastmcp_script()))}, "--transport", "stdio"]
    env: {{MRTR_TEST_TAG: {tag}}}
"""
    path = tmp / "proxy.yaml"
    path.write_text(yaml)
    (upstream,) = load_config(path, env={}).upstreams
    return upstream


@pytest_asyncio.fixture(loop_scope="session")
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


async def test_one_principal_holds_a_handful_of_children_for_its_calls(
    tmp_path: Path, http: aiohttp.ClientSession
) -> None:
    async with running_proxy(stdio_upstream(tmp_path, "calls")) as proxy:
        client = RawClient(proxy.url, http, authorization="Bearer one-client")
        replies = await asyncio.gather(*(client.call("ask_name") for _ in range(TRIES)))
        parked = [r for r in replies if "result" in r.body]
        refused = [r.error for r in replies if "error" in r.body]
        assert len(parked) == 4, [r.body for r in replies]
        assert len(stdio_children("calls")) == 4
        for error in refused:
            assert error["code"] == -31003
            assert "pool.max_sessions_per_principal" in error["message"], error
        # Another principal still gets a child of its own.
        other = await RawClient(proxy.url, http, authorization="Bearer other").call("echo", {"text": "hi"})
        assert other.result["content"][0]["text"] == "hi"


async def test_one_principal_holds_a_handful_of_bridged_legacy_sessions(
    tmp_path: Path, http: aiohttp.ClientSession
) -> None:
    async with running_proxy(stdio_upstream(tmp_path, "legacy")) as proxy:
        headers = {
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
            "Authorization": "Bearer one-legacy-client",
        }

        async def initialize() -> dict[str, object]:
            async with http.post(proxy.url, data=json.dumps(INITIALIZE), headers=headers) as resp:
                text = await resp.text()
            if text.startswith("{"):
                return dict(json.loads(text))
            data = [line[5:].strip() for line in text.splitlines() if line.startswith("data:")]
            return dict(json.loads(data[-1]))

        answers = [await initialize() for _ in range(TRIES)]
        opened = [a for a in answers if "result" in a]
        refused = [a["error"] for a in answers if "error" in a]
        assert len(opened) == 4, answers
        assert len(stdio_children("legacy")) == 4
        for error in refused:
            assert error["code"] == -31003  # type: ignore[index]
            assert "pool.max_sessions_per_principal" in error["message"]  # type: ignore[index]
