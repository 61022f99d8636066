"""Issue 41.6: `tasks/*` on an aggregated route whose first member is legacy (the FastMCP 1.30 fixture) and
whose second is a 2026-07-28 upstream serving Tasks (tests/e2e/modern_scripted.py, no credential going to
it, so its task ids are bound by the proxy). A task handle goes to the member that made it, whatever the
first member is; another principal, a forged id and an id the upstream made itself go nowhere upstream."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest
import pytest_asyncio

from e2e.harness import running_proxy
from e2e.modern_scripted import ScriptedModern, scripted_modern
from e2e.test_modern_upstream_tasks import NOT_FOUND, client
from e2e.test_tasks import created, wait_for
from proxy.config import RouteConfig, RouteMember, TasksConfig, UpstreamConfig

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session")]


@pytest_asyncio.fixture(loop_scope="session")
async def upstream() -> AsyncIterator[ScriptedModern]:
    async with scripted_modern() as server:
        yield server


@pytest.mark.parametrize("tasks", [False, True], ids=["no-legacy-tasks", "legacy-tasks"])
async def test_a_modern_members_task_on_a_route_led_by_a_legacy_member(
    fastmcp_url: str, upstream: ScriptedModern, tasks: bool
) -> None:
    modern = UpstreamConfig(name="mod", url=upstream.url, forward_headers=(), era="modern")
    route = RouteConfig("mixed", (RouteMember("fast"), RouteMember("mod")))
    extra = {"tasks": TasksConfig(policy="always", poll_interval_ms=50)} if tasks else {}
    async with (
        running_proxy(fastmcp_url, names=("fast",), extra=(modern,), routes=(route,), **extra) as proxy,
        aiohttp.ClientSession() as http,
    ):
        url = proxy.url.replace("/mcp", "/servers/mixed/mcp")
        alice, mallory = client(url, http, "alice"), client(url, http, "mallory")
        made = await alice.call("mod__job", {"text": "secret"})
        assert made.result["resultType"] == "task", made.body
        handle = made.result["taskId"]
        assert handle != "task-1"  # bound: the proxy's handle, not the upstream's id
        seen = len(upstream.seen)
        for method in ("tasks/get", "tasks/update", "tasks/cancel"):
            stolen = await mallory.request(method, {"taskId": handle})
            assert stolen.status == 200 and stolen.error == NOT_FOUND, (method, stolen.body)
        for forged in ("task-1", "", "x" * 300):
            guessed = await mallory.request("tasks/get", {"taskId": forged})
            assert guessed.status == 200 and guessed.error["code"] == -32602, (forged, guessed.body)
        assert len(upstream.seen) == seen  # none of them reached the upstream
        got = await alice.request("tasks/get", {"taskId": handle})
        assert got.result["status"] == "completed" and got.result["taskId"] == handle, got.body
        assert got.result["result"]["content"][0]["text"] == "job:secret"
        cancelled = await alice.request("tasks/cancel", {"taskId": handle})
        assert cancelled.result["status"] == "cancelled", cancelled.body
        assert upstream.task_ids_seen() == ["task-1", "task-1"]
        if tasks:  # the legacy member's own task (the proxy's Tasks front): the owner's alone too
            legacy = created(await alice.call("fast__echo", {"text": "mine"}))
            stolen = await mallory.request("tasks/get", {"taskId": legacy["taskId"]})
            assert stolen.status == 200 and stolen.error["code"] == -32602, stolen.body
            done = await wait_for(alice, legacy["taskId"], "completed", "failed", "cancelled")
            assert done["result"]["content"][0]["text"] == "mine"
