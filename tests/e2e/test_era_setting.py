"""A wrong `upstreams[].era` setting, named in one line that names the setting (upstream/era_setting.py), on
/readyz and in the log, against real servers: FastMCP 1.30 (legacy only) under `era: modern`, the mcp 2.3.0
SDK's server (2026-07-28 only) under `era: legacy`. And the settings that fit stay quiet: FastMCP 4.2.3 (two
eras) under either.

Before: FastMCP 1.30 under `era: modern` was "ready", and each request failed with the server's "Missing
session ID" in the log, never naming `era`; the mcp 2.3.0 server under `era: legacy` was "not initialising"
with four refusals of `initialize`, never naming the setting."""

from __future__ import annotations

from typing import Any

import aiohttp
import peers
import pytest
from structlog.testing import capture_logs
from waiting import eventually

from e2e.harness import RawClient, running_proxy
from proxy.config import UpstreamConfig
from proxy.process.appstate import ERA_SETTINGS

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session")]

MODERN_ON_LEGACY = (
    "upstream default: era: modern is set, but it is a legacy MCP server (server/discover answered HTTP 400: "
)
LEGACY_ON_MODERN = (
    "upstream default: era: legacy is set, but it speaks MCP 2026-07-28 only (server/discover answered, "
    "supportedVersions 2026-07-28; initialize refused), so no legacy session opens: set era: auto (or modern)"
)


async def readyz(http: aiohttp.ClientSession, url: str) -> dict[str, Any]:
    async with http.get(url.replace("/mcp", "/readyz")) as resp:
        body: dict[str, Any] = await resp.json()
        return body


async def test_a_legacy_server_under_era_modern_is_named_on_readyz_and_in_the_log(fastmcp_url: str) -> None:
    upstream = UpstreamConfig(name="default", url=fastmcp_url, era="modern")
    with capture_logs() as logs:
        async with running_proxy(upstream) as proxy, aiohttp.ClientSession() as http:
            body = await readyz(http, proxy.url)
            assert body["upstreams"]["default"] == "wrong era"
            problem = body["upstream_problems"]["default"]
            assert problem.startswith(MODERN_ON_LEGACY)
            assert problem.endswith(
                "so every request sent to it the 2026-07-28 way fails: set era: auto (or legacy)"
            )
            failed = await RawClient(proxy.url, http).request("tools/list")  # still fails, as configured
            assert "error" in failed.body
            assert (await readyz(http, proxy.url))["upstream_problems"]["default"] == problem
    wrong = [e for e in logs if e["event"] == "upstream.era_setting_wrong"]
    assert [(e["log_level"], e["problem"]) for e in wrong] == [("warning", problem)]  # once


async def test_a_failed_request_under_a_wrong_era_modern_names_it_in_the_log(fastmcp_url: str) -> None:
    """Without /readyz asked: the first request the setting fails starts the check."""
    upstream = UpstreamConfig(name="default", url=fastmcp_url, era="modern")
    with capture_logs() as logs:
        async with running_proxy(upstream) as proxy, aiohttp.ClientSession() as http:
            assert "error" in (await RawClient(proxy.url, http).request("tools/list")).body
            settings = proxy.app[ERA_SETTINGS]
            await eventually(lambda: "default" in settings.checked, "the era setting to be checked")
            assert settings.wrong["default"].startswith(MODERN_ON_LEGACY)
    assert any(e["event"] == "upstream.era_setting_wrong" for e in logs)


async def test_a_2026_only_server_under_era_legacy_is_named_once() -> None:
    """On /readyz, and in the log once: after the first request it fails (the pool could not open a session)
    and again after /readyz and more requests, the same sentence, one log line."""
    async with peers.start_mcp2_server() as url:
        upstream = UpstreamConfig(name="default", url=url, era="legacy")
        with capture_logs() as logs:
            async with running_proxy(upstream) as proxy, aiohttp.ClientSession() as http:
                client = RawClient(proxy.url, http)
                assert "error" in (await client.request("tools/list")).body
                settings = proxy.app[ERA_SETTINGS]
                await eventually(lambda: "default" in settings.wrong, "the era setting to be found wrong")
                body = await readyz(http, proxy.url)
                assert "error" in (await client.request("tools/list")).body
    assert body["upstreams"]["default"] == "wrong era"
    assert body["upstream_problems"]["default"] == LEGACY_ON_MODERN
    wrong = [e["problem"] for e in logs if e["event"] == "upstream.era_setting_wrong"]
    assert wrong == [LEGACY_ON_MODERN]


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_a_two_era_server_fits_either_setting(era: str) -> None:
    async with peers.start_fastmcp4() as url:
        upstream = UpstreamConfig(name="default", url=url, era=era)  # type: ignore[arg-type]
        async with running_proxy(upstream) as proxy, aiohttp.ClientSession() as http:
            body = await readyz(http, proxy.url)
            tools = await RawClient(proxy.url, http).request("tools/list")
    assert body["upstreams"]["default"] == "reachable" and "upstream_problems" not in body
    assert "result" in tools.body
