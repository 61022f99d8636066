"""A real Tasks client drives a legacy tool that elicits, through the proxy: `@modelcontextprotocol/ext-tasks`
(the TypeScript requester for SEP-2663) on Node 22, via tests/e2e/clients/ts_tasks_client.mjs.

(`mcp==2.3.0` has no Tasks client of its own: its `ClientExtension`/`ResultClaim` hooks let an application
write one, but none ships — see docs/conformance.md. The raw-wire lifecycle is in test_tasks.py.)
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import peers
import pytest
import pytest_asyncio

from e2e.harness import RunningProxy, running_proxy
from proxy.config import TasksConfig

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session")]

DRIVER = Path(__file__).parent / "clients" / "ts_tasks_client.mjs"


def ext_tasks() -> Path:
    return peers.node_modules() / "@modelcontextprotocol" / "ext-tasks" / "dist" / "client" / "index.js"


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def proxy(fastmcp_url: str) -> AsyncIterator[RunningProxy]:
    peers.require_peers({"node 22": peers.node_bin(), "@modelcontextprotocol/ext-tasks": ext_tasks()})
    async with running_proxy(
        fastmcp_url, tasks=TasksConfig(policy="always", poll_interval_ms=100)
    ) as running:
        yield running


async def drive(proxy: RunningProxy, tool: str, args: dict[str, Any], *extra: str) -> dict[str, Any]:
    done = await peers.run_once(
        [str(peers.node_bin()), str(DRIVER), proxy.url, tool, json.dumps(args), *extra], limit_s=45
    )
    assert done.returncode == 0 and not done.timed_out, done.stdout + done.stderr
    out: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    assert "error" not in out, out
    return out


async def test_ext_tasks_client_runs_an_eliciting_tool_as_a_task(proxy: RunningProxy) -> None:
    live_before = proxy.live  # the module's proxy: what this test leaves
    out = await drive(proxy, "work_then_ask", {"delay_s": 0.5, "after_s": 0.5})
    assert out["kind"] == "task"
    assert out["statuses"] == ["working", "input_required", "working", "completed"]
    assert out["inputs"] == [
        {"kind": "elicitation", "scope": "task", "delivery": "task-update", "inputId": "elicit-1"}
    ]
    assert out["outcome"] == "completed" and out["text"] == "worked:accept:Tess"
    assert out["wire"].count("tasks/update") == 1 and "tasks/cancel" not in out["wire"]
    assert proxy.live == live_before


async def test_ext_tasks_client_cancels_mid_way(proxy: RunningProxy) -> None:
    live_before = proxy.live  # the module's proxy: what this test leaves
    out = await drive(proxy, "slow_count", {"delay_s": 3}, "400")
    assert out["kind"] == "task"
    assert out["outcome"] == "cancelled"
    assert "tasks/cancel" in out["wire"]
    assert proxy.live == live_before
