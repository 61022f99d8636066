"""What reaches the legacy server for the logging opt-in and progress (issue 15), seen by a recording relay
between the proxy and the real server: `logging/setLevel` before a call that wants another level than the
pooled session has (server-everything declares `logging`), none for a server that does not declare it
(FastMCP 2.14), and the call carrying the proxy's own `progressToken`, never the client's.
"""

from __future__ import annotations

from typing import Any

import aiohttp
import peers
import pytest

from e2e.harness import NO_ROOTS_CAPS, RawClient, Reply, running_proxy
from e2e.recording import Recording, recording_relay

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session")]

LOG_LEVEL = "io.modelcontextprotocol/logLevel"


async def call(client: RawClient, name: str, args: dict[str, Any], meta: dict[str, Any]) -> Reply:
    body = client.body("tools/call", {"name": name, "arguments": args})
    body["params"]["_meta"].update(meta)
    return await client.send(body)


def upstream_rpcs(relay: Recording) -> list[tuple[str, Any]]:
    """(method, level or tool name) of what the proxy POSTed upstream, requests only."""
    out = []
    for sent in relay.posts():
        params = sent.message.get("params", {}) if isinstance(sent.message, dict) else {}
        if sent.rpc == "logging/setLevel":
            out.append((sent.rpc, params.get("level")))
        elif sent.rpc == "tools/call":
            out.append((sent.rpc, params.get("name")))
    return out


async def test_set_level_only_when_the_opted_in_level_changes() -> None:
    async with (
        peers.start_server_everything() as server,
        recording_relay(server) as relay,
        running_proxy(relay.url) as proxy,
        aiohttp.ClientSession() as http,
    ):
        client = RawClient(proxy.url, http, capabilities=dict(NO_ROOTS_CAPS))
        for meta in ({LOG_LEVEL: "warning"}, {LOG_LEVEL: "warning"}, {LOG_LEVEL: "debug"}, {}):
            reply = await call(client, "echo", {"message": "hi"}, meta)
            assert reply.result["content"][0]["text"] == "Echo: hi"
        assert upstream_rpcs(relay) == [
            ("logging/setLevel", "warning"),
            ("tools/call", "echo"),
            ("tools/call", "echo"),  # the session is at warning already
            ("logging/setLevel", "debug"),
            ("tools/call", "echo"),
            ("tools/call", "echo"),  # no opt-in: the session keeps its level, the proxy filters
        ]


async def test_no_set_level_for_a_server_without_logging_and_the_proxys_own_token() -> None:
    async with (
        peers.start_fastmcp2() as server,
        recording_relay(server) as relay,
        running_proxy(relay.url) as proxy,
        aiohttp.ClientSession() as http,
    ):
        client = RawClient(proxy.url, http, capabilities=dict(NO_ROOTS_CAPS))
        reply = await call(client, "log_levels", {}, {LOG_LEVEL: "error", "progressToken": "client-token"})
        assert [n["params"]["level"] for n in reply.notifications] == ["error"]
        assert upstream_rpcs(relay) == [("tools/call", "log_levels")]
        (sent,) = relay.posts("tools/call")
        token = sent.message["params"]["_meta"]["progressToken"]
        assert token.startswith("mrtr-proxy/") and token != "client-token"
        assert LOG_LEVEL not in sent.message["params"]["_meta"]  # a 2026-07-28 key, never sent upstream
