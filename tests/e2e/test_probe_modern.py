"""`mrtr-proxy probe` sends server/discover first and says what the proxy will do with a modern server."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import peers
import pytest

from e2e.test_probe import report, verdict

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session")]

TMCP = peers.FIXTURES_DIR / "tmcp_server.mjs"  # copied from branch eras-paths, which adds the tmcp peer


@contextlib.asynccontextmanager
async def start_tmcp() -> AsyncIterator[str]:
    """tmcp 1.20.0 (two eras, its own implementation) on 127.0.0.1: ``http://127.0.0.1:PORT/mcp``."""
    if not (peers.node_modules() / "tmcp").exists():
        raise peers.PeersMissingError(f"tmcp is not installed: {peers.SETUP_HINT}")

    def argv(_port: int) -> list[str]:
        return [str(peers.node_bin()), str(TMCP)]

    def env(port: int) -> dict[str, str]:
        return {"PORT": str(port), "MRTR_PEERS_DIR": str(peers.peers_dir())}

    async with peers.run_peer("tmcp", argv, env=env) as peer:
        yield f"http://127.0.0.1:{peer.port}/mcp"


async def test_a_modern_only_server(tmp_path: Path) -> None:
    async with peers.start_mcp2_server() as url:
        out = await report(url, extra=("--call", "guard_name"))
    assert out["modern"]["era"] == "modern" and out["modern"]["versions"] == ["2026-07-28"]
    assert out["era"] == "modern"
    assert {"echo", "guard_name", "guard_two"} <= set(out["modern"]["tools"])
    # probed, not assumed: the mcp 2.3.0 server acknowledges a subscription and has no tasks
    assert out["modern"]["listen"]["answer"] == "yes"
    assert verdict(out, "subscriptions/listen")[0] == "works"
    assert out["modern"]["tasks"]["answer"] == "no" and verdict(out, "tasks")[0] == "works with limits"
    assert out["tool_class"] == {
        "name": "guard_name",
        "asks": "asks natively",
        "evidence": "answered input_required at 2026-07-28 (elicitation/create)",
    }
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
        "asks natively (answered input_required at 2026-07-28 (elicitation/create)): its rounds pass through "
        "the native relay",
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
    assert out["era"] == "both" and verdict(out, "fronting")[1].endswith("era: both (two eras)")
    assert out["modern"]["call"]["outcome"] == "input_required"
    assert out["call"] is None  # called once, at 2026-07-28 (a tool has side effects)
    assert out["tool_class"]["asks"] == "asks natively"
    status, reason = verdict(out, "legacy clients through the proxy")
    assert status == "works" and "as it would going direct" in reason
    assert "era" not in out["upstream"] and "legacy_tools" not in out["upstream"]  # auto finds it
    # FastMCP 4.2.3 has no subscriptions/listen (-32601) and no tasks: said, not assumed
    assert out["modern"]["listen"] == {"answer": "no", "detail": "-32601: Method not found"}
    status, reason = verdict(out, "subscriptions/listen")
    assert status == "works with limits" and "-32601" in reason
    assert out["modern"]["tasks"]["answer"] == "no"


@pytest.mark.parametrize(
    ("tool", "asked", "refusal"),
    [("ask_name", "elicitation/create", "unavailable on 2026-07-28")],
)
async def test_a_two_era_servers_inline_asking_tool_is_classified_and_listed(
    tool: str, asked: str, refusal: str, tmp_path: Path
) -> None:
    """FastMCP 4.2.3 refuses ctx.elicit on a 2026-07-28 request: the probe then
    calls the tool on its legacy session, sees it ask inline, and the printed YAML carries `legacy_tools`."""
    async with peers.start_fastmcp4() as url:
        out = await report(url, extra=("--call", tool))
    assert refusal in out["modern"]["call"]["detail"]
    assert out["call"]["server_requests"] == [asked]  # the legacy call: it asked inline
    assert out["tool_class"]["asks"] == "asks inline"
    status, reason = verdict(out, f"tools/call {tool}")
    assert status == "works with limits" and "goes in upstreams[].legacy_tools" in reason
    assert out["upstream"]["legacy_tools"] == [tool]
    path = tmp_path / "probe.yaml"
    path.write_text(out["config_yaml"])
    checked = await peers.run_once([sys.executable, "-m", "proxy", "check-config", str(path)], limit_s=30)
    assert checked.returncode == 0, checked.stderr


async def test_a_legacy_server_says_legacy(fastmcp_url: str) -> None:
    out = await report(fastmcp_url)
    assert out["modern"]["era"] == "legacy" and "HTTP 400" in out["modern"]["detail"]
    assert out["era"] == "legacy" and out["tool_class"] is None
    assert verdict(out, "fronting")[0] == "works"


async def test_a_modern_only_stdio_server_acknowledges_listen() -> None:
    """Over stdio too, subscriptions/listen is probed: the mcp 2.3.0 server's acknowledgment is seen."""
    command = (str(peers.client_python()), str(peers.mcp2_server_script()), "--stdio")
    out = await report("--", *command)
    assert out["era"] == "modern" and out["transport"] == "stdio"
    assert out["modern"]["listen"] == {
        "answer": "yes",
        "detail": "acknowledged (notifications/subscriptions/acknowledged)",
    }
    assert out["modern"]["tools_listed"]["answer"] == "yes"


async def test_tmcp_is_both_and_its_unreplayable_tool_asks_inline() -> None:
    """tmcp 1.20.0: two eras; ask_name (server.elicitation, not replayable) is refused at 2026-07-28 with
    -32603 "… not marked as replayable", asks inline on the legacy session, and goes in legacy_tools; its
    subscriptions/listen is acknowledged (FastMCP 4.2.3's is not: each is probed)."""
    async with start_tmcp() as url:
        out = await report(url, extra=("--call", "ask_name"))
    assert out["era"] == "both"
    assert out["modern"]["call"]["outcome"] == "error"
    assert "not marked as replayable" in out["modern"]["call"]["detail"]
    assert out["call"]["server_requests"] == ["elicitation/create"]
    assert out["tool_class"]["asks"] == "asks inline"
    assert out["upstream"]["legacy_tools"] == ["ask_name"]
    assert out["modern"]["listen"]["answer"] == "yes"
    assert verdict(out, "subscriptions/listen")[0] == "works"


async def test_tmcps_replayable_tool_asks_natively() -> None:
    async with start_tmcp() as url:
        out = await report(url, extra=("--call", "guard_name"))
    assert out["tool_class"]["asks"] == "asks natively" and out["call"] is None
    assert "legacy_tools" not in out["upstream"]
