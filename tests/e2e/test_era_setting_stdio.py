"""A wrong `upstreams[].era` on a stdio upstream is named when serving, as for HTTP upstreams
(upstream/era_setting.py): the same one line naming the setting on /readyz (`wrong era`) and once in the log.
Real servers: FastMCP 1.30 over stdio (legacy only) under `era: modern`, the mcp 2.3.0 SDK's stdio server
(2026-07-28 only) under `era: legacy`."""

from __future__ import annotations

import aiohttp
import peers
import pytest
from structlog.testing import capture_logs

from e2e.harness import running_proxy
from e2e.test_era_setting import LEGACY_ON_MODERN, readyz
from proxy.config import TimeoutsConfig, UpstreamConfig

MODERN_ON_LEGACY = (
    "upstream default: era: modern is set, but it is a legacy MCP server (server/discover answered "
)
pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session"), pytest.mark.timeout(120)]


def legacy_stdio(era: str) -> UpstreamConfig:
    return UpstreamConfig(
        name="default",
        transport="stdio",
        command=str(peers.legacy_python()),
        args=(str(peers.legacy_fastmcp_script()), "--transport", "stdio"),
        era=era,  # type: ignore[arg-type]
    )


def modern_only_stdio(era: str) -> UpstreamConfig:
    return UpstreamConfig(
        name="default",
        transport="stdio",
        command=str(peers.client_python()),
        args=(str(peers.mcp2_server_script()), "--stdio"),
        era=era,  # type: ignore[arg-type]
        # The check's own child must start and answer server/discover within connect_s, or it is judged
        # legacy; the mcp 2.3.0 server's start took over the default 10 s on a loaded CI host.
        timeouts=TimeoutsConfig(connect_s=60),
    )


@pytest.mark.parametrize(
    ("upstream", "starts"),
    [(legacy_stdio("modern"), MODERN_ON_LEGACY), (modern_only_stdio("legacy"), LEGACY_ON_MODERN)],
    ids=["legacy-under-modern", "2026-only-under-legacy"],
)
async def test_a_wrong_era_on_a_stdio_upstream_is_named_on_readyz_and_once_in_the_log(
    upstream: UpstreamConfig, starts: str
) -> None:
    with capture_logs() as logs:
        async with running_proxy(upstream) as proxy, aiohttp.ClientSession() as http:
            body = await readyz(http, proxy.url)
            assert body["upstreams"]["default"] == "wrong era", body
            problem = body["upstream_problems"]["default"]
            assert problem.startswith(starts), problem
            assert (await readyz(http, proxy.url))["upstream_problems"]["default"] == problem
    wrong = [e for e in logs if e["event"] == "upstream.era_setting_wrong"]
    assert [(e["log_level"], e["problem"]) for e in wrong] == [("warning", problem)]


@pytest.mark.parametrize(
    "upstream", [legacy_stdio("legacy"), modern_only_stdio("modern")], ids=["legacy", "2026"]
)
async def test_a_fitting_era_on_a_stdio_upstream_names_nothing(upstream: UpstreamConfig) -> None:
    async with running_proxy(upstream) as proxy, aiohttp.ClientSession() as http:
        body = await readyz(http, proxy.url)
    assert body["upstreams"]["default"] == "reachable" and not body.get("upstream_problems"), body
