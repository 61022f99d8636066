"""`mrtr-proxy probe` sends server/discover first and says what the proxy will do with a modern server."""

from __future__ import annotations

import sys
from pathlib import Path

import peers
import pytest

from e2e.test_probe import report, verdict

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session")]


async def test_a_modern_only_server(tmp_path: Path) -> None:
    async with peers.start_mcp2_server() as url:
        out = await report(url, extra=("--call", "guard_name"))
    assert out["modern"]["era"] == "modern" and out["modern"]["versions"] == ["2026-07-28"]
    assert {"echo", "guard_name", "guard_two"} <= set(out["modern"]["tools"])
    assert out["modern"]["call"] == {
        "name": "guard_name",
        "outcome": "input_required",
        "asks": ["elicitation/create"],
        "detail": "",
    }
    assert out["negotiated"] is None and out["frontable"]
    assert verdict(out, "2026-07-28 clients")[0] == "works"
    status, reason = verdict(out, "legacy clients through the proxy")
    assert status == "works" and reason.startswith("the mirror: the proxy is their legacy server")
    assert verdict(out, "tools/call guard_name") == (
        "works",
        "answers input_required natively (asks elicitation/create): its rounds pass through the native relay",
    )
    assert out["upstream"]["era"] == "modern"
    path = tmp_path / "probe.yaml"
    path.write_text(out["config_yaml"])
    checked = await peers.run_once([sys.executable, "-m", "proxy", "check-config", str(path)], limit_s=30)
    assert checked.returncode == 0, checked.stderr


async def test_a_two_era_server() -> None:
    async with peers.start_fastmcp4() as url:
        out = await report(url, extra=("--call", "guard_two"))
    assert out["modern"]["era"] == "modern" and out["negotiated"] == "2025-11-25"
    assert out["modern"]["call"]["outcome"] == "input_required"
    assert out["call"] is None  # called once, at 2026-07-28 (a tool has side effects)
    status, reason = verdict(out, "legacy clients through the proxy")
    assert status == "works" and "legacy_tools" in reason
    assert "era" not in out["upstream"]  # auto finds it


async def test_a_two_era_servers_ctx_elicit_tool_fails_at_2026() -> None:
    """FastMCP 4.2.3 refuses ctx.elicit on a 2026-07-28 request (a tool error): the probe says so."""
    async with peers.start_fastmcp4() as url:
        out = await report(url, extra=("--call", "ask_name"))
    status, reason = verdict(out, "tools/call ask_name")
    assert status == "works with limits" and "unavailable on 2026-07-28" in reason


async def test_a_legacy_server_says_legacy(fastmcp_url: str) -> None:
    out = await report(fastmcp_url)
    assert out["modern"]["era"] == "legacy" and "HTTP 400" in out["modern"]["detail"]
    assert verdict(out, "fronting")[0] == "works"
