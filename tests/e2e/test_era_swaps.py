"""Upgrades and downgrades in place (issue 43): the server on an upstream's address replaced by another era's
while clients call, every request answered — the full matrix of swaps by principals by client eras.

- swaps: legacy FastMCP 1.30 ↔ two-era FastMCP 4.2.3, legacy ↔ the mcp 2.3.0 SDK's 2026-07-28-only server;
- one principal (its pooled session, or its mirror session, was opened on the old server) or a new principal
  per request (no pooled session dies to tell of the swap);
- a 2026-07-28 client (RawClient), or a legacy client (initialize, then tools/call). A legacy client whose
  session the swap ended is answered 404, as going direct after a server restart: it initializes again (what
  the mcp SDK clients do), and that is the only answer short of success it may get.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import aiohttp
import peers
import pytest

from e2e.harness import RawClient, running_proxy
from e2e.test_mirror import ELICIT, RawLegacy

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session"), pytest.mark.timeout(240)]

Start = Callable[[int], AbstractAsyncContextManager[str]]
SERVERS: dict[str, Start] = {
    "legacy": lambda port: peers.start_fastmcp(port=port),
    "two-era": lambda port: peers.start_fastmcp4(port=port),
    "2026-only": lambda port: peers.start_mcp2_server(port=port),
}
SWAPS = [("legacy", "two-era"), ("two-era", "legacy"), ("legacy", "2026-only"), ("2026-only", "legacy")]
AFTER = 3  # requests after the swap (the first one notices it)


class Caller:
    """One client era, one principal or a new one per request: `echo(text)` is the tool's answer text, or
    what went wrong."""

    def __init__(self, url: str, http: aiohttp.ClientSession, era: str, per_request: bool) -> None:
        self.url, self.http, self.era, self.per_request = url, http, era, per_request
        self.n = itertools.count()
        self.legacy: RawLegacy | None = None
        self.reinitialized = 0

    def principal(self) -> str:
        return f"Bearer user{next(self.n)}" if self.per_request else "Bearer alice"

    async def echo(self, text: str) -> str:
        if self.era == "2026":
            reply = await RawClient(self.url, self.http, authorization=self.principal()).call(
                "echo", {"text": text}
            )
            return _text(reply.body) if reply.status == 200 else f"HTTP {reply.status}: {reply.body}"
        if self.legacy is None or self.per_request:
            self.legacy = RawLegacy(self.url, self.http, authorization=self.principal())
            await self.legacy.initialize(ELICIT)
        status, said = await self.legacy.call("echo", arguments={"text": text})
        if status == 404:  # the session is gone, as going direct after a restart: initialize again
            self.reinitialized += 1
            del self.legacy.headers["Mcp-Session-Id"]
            await self.legacy.initialize(ELICIT)
            status, said = await self.legacy.call("echo", arguments={"text": text})
        return _text(said[-1]) if status == 200 and said else f"HTTP {status}: {said}"


def _text(msg: dict[str, Any]) -> str:
    result = msg.get("result") or {}
    if result.get("isError") or not result:
        return f"failed: {msg}"
    return " ".join(str(c.get("text")) for c in result.get("content") or [])


@pytest.mark.parametrize("client", ["2026", "legacy"])
@pytest.mark.parametrize("principals", ["one", "new-per-request"])
@pytest.mark.parametrize(("old", "new"), SWAPS, ids=[f"{a}->{b}" for a, b in SWAPS])
async def test_an_in_place_swap_loses_no_request(old: str, new: str, principals: str, client: str) -> None:
    port = peers.free_port()
    async with (
        running_proxy(f"http://127.0.0.1:{port}/mcp") as proxy,
        aiohttp.ClientSession() as http,
    ):
        caller = Caller(proxy.url, http, client, principals == "new-per-request")
        async with SERVERS[old](port):
            assert await caller.echo("before") == "before"
        async with SERVERS[new](port):
            answers = [await caller.echo(f"after{i}") for i in range(AFTER)]
    assert answers == [f"after{i}" for i in range(AFTER)], answers
    # A legacy client re-initializes at most once, and only where its session died with the old server.
    assert caller.reinitialized <= (1 if client == "legacy" and principals == "one" else 0)
