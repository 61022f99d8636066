"""The in-process front (front/modern/inner.py) runs the modern pipeline the HTTP front runs: a mirrored
round has its own canonical line (`request.mirrored`, with the legacy request's id) and is counted in the
request metrics, as a request over HTTP is.

A legacy client on an aggregated route (its rounds go through the modern front in process), in front of a
scripted 2026-07-28 upstream in this process.
"""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest
from e2e.harness import running_proxy
from e2e.modern_scripted import scripted_modern
from prometheus_client.parser import text_string_to_metric_families
from structlog.testing import capture_logs

from proxy.config import RouteConfig, RouteMember
from proxy.front.request_ids import REQUEST_ID_HEADER
from proxy.observe.metrics import METRICS

pytestmark = pytest.mark.asyncio(loop_scope="session")

LEGACY = "2025-11-25"
ACCEPT = "application/json, text/event-stream"


def requests_counted(text: str, **labels: str) -> float:
    """The sum of `mrtr_proxy_requests_total` over the samples with these labels."""
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "mrtr_proxy_requests_total" and labels.items() <= sample.labels.items()
    )


async def test_a_mirrored_round_is_logged_and_counted() -> None:
    route = RouteConfig("fleet", (RouteMember("default"),), prefix_mode="never")
    async with scripted_modern() as upstream, running_proxy(upstream.url, routes=(route,)) as proxy:
        upstream.lists = True  # `change_tools` answers: the number of listens open (none)
        url = proxy.url.replace("/mcp", "/servers/fleet/mcp")
        async with aiohttp.ClientSession() as http:
            params = {
                "protocolVersion": LEGACY,
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            }
            body: dict[str, Any] = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}
            async with http.post(url, json=body, headers={"Accept": ACCEPT}) as resp:
                assert resp.status == 200, await resp.text()
                sid = resp.headers["Mcp-Session-Id"]
            before = requests_counted(proxy.app[METRICS].render().decode(), method="tools/call")
            call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "change_tools"}}
            headers = {"Accept": ACCEPT, "Mcp-Session-Id": sid, "MCP-Protocol-Version": LEGACY}
            with capture_logs() as logs:
                async with http.post(
                    url, json=call, headers={**headers, REQUEST_ID_HEADER: "legacy-1"}
                ) as resp:
                    text = await resp.text()
                    assert resp.status == 200 and '"text":"0"' in text.replace(" ", ""), text
        after = requests_counted(proxy.app[METRICS].render().decode(), method="tools/call")
    rounds = [line for line in logs if line["event"] == "request.mirrored"]
    assert len(rounds) == 1, logs
    assert rounds[0]["method"] == "tools/call" and rounds[0]["tool"] == "change_tools"
    assert (
        rounds[0]["via"] == "mirror" and rounds[0]["route"] == "fleet" and rounds[0]["outcome"] == "complete"
    )
    assert "duration_ms" in rounds[0]
    # The legacy request and its one mirrored round, each counted.
    assert after - before == 2
