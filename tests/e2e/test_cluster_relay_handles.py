"""Issue 41.6: relay handles and task handles of a 2026-07-28 upstream, made on one replica and brought to
another (two `mrtr-proxy serve` processes sharing one key), on the upstream's own route and on an
aggregated route led by a legacy member (FastMCP 1.30).

The upstream (tests/e2e/modern_scripted.py) gets no client credential, so the proxy binds its
`requestState` and task ids to the principal: whichever replica a retry or `tasks/*` lands on, the owner
gets its work, another principal gets the error the upstream itself would give, and nothing of the
other's reaches the upstream.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
import pytest_asyncio

from e2e.modern_scripted import ScriptedModern, scripted_modern
from e2e.replicas import cluster, url_of
from e2e.test_modern_upstream_tasks import NOT_FOUND, client

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session")]

ANSWERS = {"name": {"action": "accept", "content": {"name": "Ada"}}}


@pytest_asyncio.fixture(loop_scope="session")
async def upstream() -> AsyncIterator[ScriptedModern]:
    async with scripted_modern() as server:
        yield server


@pytest.mark.parametrize(
    ("path", "prefix"), [("/mcp", ""), ("/servers/pair/mcp", "mod__")], ids=["own", "route"]
)
async def test_relay_and_task_handles_made_on_one_replica_serve_their_owner_on_another(
    fastmcp_url: str, upstream: ScriptedModern, path: str, prefix: str
) -> None:
    more: dict[str, Any] = {
        "upstreams": [
            {"name": "mod", "url": upstream.url, "forward_headers": [], "era": "modern"},
            {"name": "fast", "url": str(fastmcp_url)},
        ],
        "routes": [{"name": "pair", "upstreams": ["fast", "mod"]}],
    }
    async with cluster(str(fastmcp_url), 2, more=more) as group, aiohttp.ClientSession() as http:
        one, two = (url_of(r).removesuffix("/mcp") + path for r in group.replicas)
        alice_one, alice_two = client(one, http, "alice"), client(two, http, "alice")
        mallory_two = client(two, http, "mallory")

        first = await alice_one.call(f"{prefix}big", {"size": 2000})
        state = first.result["requestState"]
        assert first.result["resultType"] == "input_required" and "v1." not in state, first.body
        seen = len(upstream.seen)
        stolen = await mallory_two.call(
            f"{prefix}big", {"size": 2000}, inputResponses=ANSWERS, requestState=state
        )
        assert stolen.status == 200 and stolen.error == {"code": -32602, "message": "Invalid requestState"}
        assert len(upstream.seen) == seen  # Mallory's retry reached nothing
        done = await alice_two.call(
            f"{prefix}big", {"size": 2000}, inputResponses=ANSWERS, requestState=state
        )
        assert done.result["content"][0]["text"] == "big:Ada:2000", done.body

        made = await alice_one.call(f"{prefix}job", {"text": "secret"})
        handle = made.result["taskId"]
        assert made.result["resultType"] == "task" and not handle.startswith("task-"), made.body
        seen = len(upstream.seen)
        for method in ("tasks/get", "tasks/update", "tasks/cancel"):
            taken = await mallory_two.request(method, {"taskId": handle})
            assert taken.status == 200 and taken.error == NOT_FOUND, (method, taken.body)
        assert len(upstream.seen) == seen
        got = await alice_two.request("tasks/get", {"taskId": handle})
        assert got.result["taskId"] == handle and got.result["status"] == "completed", got.body
        assert got.result["result"]["content"][0]["text"] == "job:secret"
        cancelled = await alice_two.request("tasks/cancel", {"taskId": handle})
        assert cancelled.result["status"] == "cancelled", cancelled.body
