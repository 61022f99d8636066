"""Era detection (proxy/upstream/era.py) against real servers of each era, and the pure judgments."""

from __future__ import annotations

import io
import json
import sys
import textwrap

import aiohttp
import peers
import pytest
import structlog

from proxy.config import UpstreamConfig
from proxy.observe import logs
from proxy.upstream.era import EraBook, fixed_verdict, judge_discover
from proxy.upstream.modern import header_value, metadata_headers, modern_answer
from proxy.upstream.modern_stdio import ModernChildren
from proxy.wire import jsonrpc


def book_for(url: str, **extra: object) -> tuple[EraBook, aiohttp.ClientSession]:
    http = aiohttp.ClientSession()
    up = UpstreamConfig(name="up", url=url, **extra)  # type: ignore[arg-type]
    return EraBook({"up": up}, {"up": http}), http


async def era_of(url: str, **extra: object) -> tuple[str, EraBook]:
    book, http = book_for(url, **extra)
    async with http:
        return await book.era("up"), book


async def test_fastmcp_1_30_is_legacy(fastmcp_url: str) -> None:
    era, book = await era_of(fastmcp_url)
    assert era == "legacy"
    verdict = book.verdict("up")
    assert verdict is not None and verdict.how == "probe"
    assert "HTTP 400" in verdict.detail  # its answer to a request without a session
    assert book.describe() == {"up": "legacy"}


async def test_fastmcp_4_two_eras_is_both() -> None:
    async with peers.start_fastmcp4() as url:
        era, book = await era_of(url)
    assert era == "both"  # server/discover answered, and a legacy initialize too
    verdict = book.verdict("up")
    assert verdict is not None and verdict.versions == ("2026-07-28",)
    assert verdict.detail == "initialize answered too (2025-11-25)"
    assert book.describe() == {"up": "both"}


async def test_tmcp_two_eras_is_both() -> None:
    async with peers.start_tmcp() as url:
        era, book = await era_of(url)
    assert era == "both"
    verdict = book.verdict("up")
    assert verdict is not None and verdict.detail.startswith("initialize answered too")


async def test_mcp2_server_is_modern() -> None:
    async with peers.start_mcp2_server() as url:
        era, book = await era_of(url)
    assert (era, book.describe()) == ("modern", {"up": "modern"})


async def test_verdict_is_cached_and_probed_again_when_suspect(fastmcp_url: str) -> None:
    book, http = book_for(fastmcp_url)
    async with http:
        assert [await book.era("up") for _ in range(3)] == ["legacy"] * 3
        assert book.probes == 1
        book.suspect("up", "a session died")
        assert await book.era("up") == "legacy"
        assert book.probes == 2


async def test_unreachable_upstream_decides_nothing() -> None:
    book, http = book_for(f"http://127.0.0.1:{peers.closed_port()}/mcp")
    async with http:
        assert await book.era("up") == "legacy"  # the request goes the legacy way, which reports the failure
        assert book.describe() == {"up": "unknown"}
        await book.era("up")
        assert book.probes == 2  # not cached: probed again


async def test_configured_and_transport_eras_are_never_probed() -> None:
    assert fixed_verdict(UpstreamConfig(name="a", url="http://x/sse", transport="sse")).era == "legacy"  # type: ignore[union-attr]
    # stdio: probed on a 2026-07-28 child of its own (auto), or fixed by era like any other
    assert fixed_verdict(UpstreamConfig(name="b", command="server", transport="stdio")) is None
    stdio = fixed_verdict(UpstreamConfig(name="b", command="server", transport="stdio", era="modern"))
    assert stdio is not None and (stdio.era, stdio.how) == ("modern", "configured")
    without = EraBook({"b": UpstreamConfig(name="b", command="server", transport="stdio")}, {})
    assert without.describe() == {"b": "legacy"}  # no 2026-07-28 stdio client given: legacy, as before
    modern = fixed_verdict(UpstreamConfig(name="c", url="http://x/mcp", era="modern"))
    assert modern is not None and (modern.era, modern.how) == ("modern", "configured")
    assert fixed_verdict(UpstreamConfig(name="d", url="http://x/mcp")) is None
    book, http = book_for(f"http://127.0.0.1:{peers.closed_port()}/mcp", era="modern")
    async with http:
        assert await book.era("up") == "modern"
        book.suspect("up", "ignored: configured")
        assert await book.era("up") == "modern"
    assert book.probes == 0


def test_judging_answers() -> None:
    discover = jsonrpc.Result(1, {"supportedVersions": ["2026-07-28"], "capabilities": {}})
    assert judge_discover(discover).era == "modern"
    unsupported = jsonrpc.error(1, jsonrpc.UNSUPPORTED_PROTOCOL_VERSION, "no", {"supported": ["2027-01-01"]})
    assert judge_discover(unsupported).versions == ("2027-01-01",)
    assert judge_discover(jsonrpc.error(1, jsonrpc.METHOD_NOT_FOUND, "no such method")).era == "legacy"
    # A legacy Streamable HTTP server refuses a request without a session naming no request.
    assert not modern_answer(400, jsonrpc.error("server-error", -32600, "Missing session ID"), 7)
    assert not modern_answer(404, None, 7)
    assert modern_answer(400, jsonrpc.error(None, jsonrpc.HEADER_MISMATCH, "mismatch"), 7)
    assert modern_answer(200, jsonrpc.error(7, jsonrpc.INVALID_PARAMS, "bad requestState"), 7)
    assert modern_answer(200, jsonrpc.Result(7, {}), 7)


def test_request_headers() -> None:
    call = jsonrpc.Request(1, "tools/call", {"name": "héllo", "arguments": {}})
    headers = metadata_headers(call)
    assert headers["Mcp-Method"] == "tools/call" and headers["MCP-Protocol-Version"] == "2026-07-28"
    assert headers["Mcp-Name"] == "=?base64?aMOpbGxv?="
    assert header_value("get_weather") == "get_weather"
    assert header_value(" padded ") == "=?base64?IHBhZGRlZCA=?="
    assert header_value("=?base64?literal?=") == "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="
    assert "Mcp-Name" not in metadata_headers(jsonrpc.Request(2, "tools/list", {}))


# --------------------------------------------------------------------------------------------------
# quiet probes of stdio servers (issue 45 item 5)


async def _probe_stdio_logged(level: str, up: UpstreamConfig) -> tuple[str, list[dict[str, object]]]:
    """The era of stdio upstream `up`, probed on a real child, and every line the proxy's logging wrote."""
    out = io.StringIO()
    logs.configure(level, "json", stream=out)
    try:
        children = ModernChildren({up.name: up})
        book = EraBook({up.name: up}, {}, children)
        try:
            era = await book.era(up.name)
        finally:
            await children.close()
    finally:
        structlog.reset_defaults()
    return era, [json.loads(line) for line in out.getvalue().splitlines()]


def _example_files_upstream() -> UpstreamConfig:
    """config/example.yaml's `files`: the demo's FastMCP 1.30 server over stdio, era auto."""
    return UpstreamConfig(
        name="files",
        command=str(peers.legacy_python()),
        args=(str(peers.REPO_ROOT / "demo" / "legacy_server.py"), "--stdio"),
        env={"LOG_LEVEL": "warning"},
        transport="stdio",
    )


@pytest.mark.peers
@pytest.mark.parametrize("level", ["info", "debug"])
async def test_the_era_probe_of_a_legacy_stdio_server_is_one_debug_line_not_its_stderr(level: str) -> None:
    """FastMCP 1.30 cannot parse the 2026-07-28 server/discover and writes its pydantic validation errors to
    stderr: 94 `upstream.stderr` lines at info per probe. That is the probe's expected answer: above debug
    nothing of it is logged, at debug one line counts it."""
    era, lines = await _probe_stdio_logged(level, _example_files_upstream())
    assert era == "legacy"
    assert [e for e in lines if e["event"] == "upstream.stderr"] == []
    held = [e for e in lines if e["event"] == "upstream.era_probe_stderr"]
    if level == "debug":
        (line,) = held
        assert line["level"] == "debug" and line["upstream"] == "files"
        assert isinstance(line["lines"], int) and line["lines"] >= 10, line  # 94 with mcp 1.30.0
    else:
        assert held == []
    events = [e["event"] for e in lines if e["level"] != "debug"]
    assert events == ["upstream.child_started", "upstream.child_stopped", "upstream.era"], events


MODERN_TALKER = """
import json, sys
sys.stderr.write("modern server starting\\n"); sys.stderr.flush()
for line in sys.stdin:
    m = json.loads(line)
    sys.stderr.write("got " + m["method"] + "\\n"); sys.stderr.flush()
    print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": {
        "supportedVersions": ["2026-07-28"], "capabilities": {},
        "serverInfo": {"name": "t", "version": "1"}}}), flush=True)
"""


async def test_a_stdio_server_the_probe_finds_modern_keeps_its_stderr_at_info() -> None:
    """Only a retired (legacy) probe child is quiet: a 2026-07-28 child's stderr, held during the probe,
    is logged as usual once its era is known."""
    up = UpstreamConfig(
        name="up", command=sys.executable, args=("-c", textwrap.dedent(MODERN_TALKER)), transport="stdio"
    )
    era, lines = await _probe_stdio_logged("info", up)
    assert era == "modern"
    said = [e["line"] for e in lines if e["event"] == "upstream.stderr"]
    assert said == ["modern server starting", "got server/discover"], lines
