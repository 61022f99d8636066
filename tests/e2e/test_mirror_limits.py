"""The mirror's limits, against FastMCP 4.2.3: its calls count against the proxy's call limits
(calls.max_parked, max_parked_per_principal), so a legacy client of a 2026-07-28 upstream cannot hold more
calls waiting for its answers than a 2026-07-28 client could hold parked calls; and its session ids
expire (front.mirror_session_ttl_s)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import peers
import pytest
import pytest_asyncio
from waiting import eventually

from e2e.harness import running_proxy
from e2e.test_mirror import ELICIT, RawLegacy
from proxy.config import FrontConfig
from proxy.handle.mirror_ids import open_mirror_session
from proxy.process.appstate import CALLS, CODEC, MIRROR

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session")]


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def fastmcp4_url() -> AsyncIterator[str]:
    async with peers.start_fastmcp4() as url:
        yield url


class Waiting:
    """A `guard_name` call whose elicitation reached the client and is not answered yet."""

    def __init__(self, client: RawLegacy) -> None:
        self.client = client
        self.asked: list[Any] = []
        self.task = asyncio.ensure_future(client.call("guard_name", answerer=self._hold))

    def _hold(self, msg: dict[str, Any]) -> None:
        self.asked.append(msg["id"])

    async def started(self) -> None:
        await eventually(lambda: self.asked or self.task.done(), "the mirror to ask the client", 30)
        assert self.asked, self.task.result()

    async def finish(self, name: str) -> str:
        answer = {"action": "accept", "content": {"name": name}}
        assert await self.client.answer(self.asked[0], answer) == 202
        _status, messages = await self.task
        assert "result" in messages[-1], messages
        return str(messages[-1]["result"]["content"][0]["text"])


async def refused(client: RawLegacy) -> dict[str, Any]:
    status, messages = await client.call("guard_name", answerer=None)
    assert status == 200 and len(messages) == 1, messages  # nothing went upstream, nothing was asked
    return messages[0]["error"]  # type: ignore[no-any-return]


async def test_mirrored_calls_count_against_the_call_limits(fastmcp4_url: str) -> None:
    async with (
        running_proxy(fastmcp4_url, max_parked=3, max_parked_per_principal=2, parked_ttl_s=60) as proxy,
        aiohttp.ClientSession() as http,
    ):
        alice, bob, carol = (RawLegacy(proxy.url, http, f"Bearer {who}") for who in ("alice", "bob", "carol"))
        for client in (alice, bob, carol):
            await client.initialize(ELICIT)
        # One after the other: the first call of guard_name on a two-era upstream goes the legacy way first
        # (issue 43) and, refused, is learned native; while that legacy attempt runs it holds a second place
        # of the principal's (the proxy's MRTR call under the mirror's), so two concurrent first calls would
        # meet the limit of 2 early. From the second call on the tool goes straight: one place per call.
        held = [Waiting(alice)]
        await held[0].started()
        held.append(Waiting(alice))
        await held[1].started()
        assert await refused(alice) == {
            "code": -31003,
            "message": "Too many calls: this client holds 2 parked or running calls "
            "(calls.max_parked_per_principal); finish or abandon some first",
        }
        held.append(Waiting(bob))
        await held[-1].started()
        assert await refused(carol) == {
            "code": -31003,
            "message": "Too many calls: the proxy holds 3 parked or running calls (calls.max_parked)",
        }
        registry = proxy.app[CALLS].registry
        assert registry.held == 3 and len(proxy.app[MIRROR].calls) == 3
        assert registry.refusals == {"principal_share": 1, "calls_total": 1}
        assert await held[0].finish("A1") == "hello:A1"
        again = Waiting(alice)  # room again: the ended call let go of its place
        await again.started()
        for call, name in ((held[1], "A2"), (held[2], "B"), (again, "A3")):
            assert await call.finish(name) == f"hello:{name}"
        assert registry.held == 0 and len(proxy.app[MIRROR].calls) == 0


async def test_a_mirror_session_id_expires_and_the_client_initializes_again(fastmcp4_url: str) -> None:
    """front.mirror_session_ttl_s: the sealed id carries its absolute expiry (using it does not extend
    it); past it every request of the session, a DELETE included, is 404 "Session not found", and a new
    initialize gives a new, working session."""
    front = FrontConfig(mirror_session_ttl_s=1)
    async with running_proxy(fastmcp4_url, front=front) as proxy, aiohttp.ClientSession() as http:
        client = RawLegacy(proxy.url, http)
        first = await client.initialize(ELICIT)
        opened = open_mirror_session(proxy.app[CODEC], first)
        assert 0 < opened.expires_at - time.time() <= 1
        listed = {"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {}}
        headers = {**client.headers, "Accept": "application/json"}
        async with http.post(proxy.url, json=listed, headers=headers) as resp:
            assert resp.status == 200 and "tools" in (await resp.json())["result"]
        await asyncio.sleep(max(0.0, opened.expires_at - time.time()) + 0.2)  # past the sealed expiry
        async with http.post(proxy.url, json=listed, headers=headers) as resp:
            assert resp.status == 404
            assert (await resp.json())["error"] == {"code": -32600, "message": "Session not found"}
        async with http.delete(proxy.url, headers=headers) as resp:
            assert resp.status == 404
        del client.headers["Mcp-Session-Id"]
        second = await client.initialize(ELICIT)
        assert second != first
        status, messages = await client.call("echo", arguments={"text": "again"})
        assert status == 200 and messages[-1]["result"]["content"][0]["text"] == "again"
