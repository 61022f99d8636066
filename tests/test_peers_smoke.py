"""The peer harness works: each real peer starts on 127.0.0.1, answers initialize + tools/list over a
raw aiohttp client, and is gone once its context closes. Plus the harness's own failure paths."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import aiohttp
import peers
import pytest
from yarl import URL

TIMEOUT = aiohttp.ClientTimeout(total=15)
ACCEPT_BOTH = "application/json, text/event-stream"
CLIENT_CAPS = {"elicitation": {"form": {}, "url": {}}, "sampling": {}, "roots": {"listChanged": True}}

FASTMCP_TOOLS = {
    "echo",
    "add",
    "counter",
    "side_effects",
    "slow_echo",
    "ask_name",
    "ask_url",
    "sample",
    "sample_inline",
    "roots",
    "roots_inline",
    "two_questions",
    "all_at_once",
    "poll_echo",
    "poll_ask_name",
}
# server-everything registers these only for a client that declared the matching capability
EVERYTHING_CONDITIONAL_TOOLS = {
    "trigger-elicitation-request",
    "trigger-url-elicitation",
    "trigger-sampling-request",
    "get-roots-list",
}


def _initialize(request_id: int, version: str) -> dict[str, Any]:
    params = {
        "protocolVersion": version,
        "capabilities": CLIENT_CAPS,
        "clientInfo": {"name": "smoke", "version": "0"},
    }
    return {"jsonrpc": "2.0", "id": request_id, "method": "initialize", "params": params}


async def _sse_messages(response: aiohttp.ClientResponse) -> AsyncIterator[dict[str, Any]]:
    """JSON-RPC messages from the ``data:`` of an SSE body (priming events with empty data skipped)."""
    data: list[str] = []
    async for raw in response.content:
        line = raw.decode().rstrip("\r\n")
        if line == "":
            if data and "".join(data).strip():
                yield json.loads("\n".join(data))
            data = []
        elif line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))


async def _post(
    http: aiohttp.ClientSession, url: str, body: dict[str, Any], headers: dict[str, str]
) -> tuple[aiohttp.ClientResponse, dict[str, Any] | None]:
    """POST one JSON-RPC message to a streamable-http endpoint; return the response and its reply."""
    async with http.post(url, json=body, headers={"Accept": ACCEPT_BOTH, **headers}) as response:
        if "id" not in body:
            return response, None
        assert response.status == 200, await response.text()
        if response.content_type == "application/json":
            reply: dict[str, Any] = await response.json()
            return response, reply
        assert response.content_type == "text/event-stream"
        async for message in _sse_messages(response):
            if message.get("id") == body["id"] and "method" not in message:
                return response, message
    raise AssertionError(f"no reply to {body['method']}")


async def _streamable_http_handshake(url: str) -> tuple[str, list[str]]:
    """initialize → notifications/initialized → tools/list; return (protocol version, tool names)."""
    async with aiohttp.ClientSession(timeout=TIMEOUT) as http:
        response, reply = await _post(http, url, _initialize(1, "2025-11-25"), {})
        assert reply is not None
        session_id = response.headers["Mcp-Session-Id"]
        version: str = reply["result"]["protocolVersion"]
        headers = {"Mcp-Session-Id": session_id, "MCP-Protocol-Version": version}
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        response, _ = await _post(http, url, initialized, headers)
        assert response.status == 202
        _, reply = await _post(http, url, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, headers)
        assert reply is not None
        names = [tool["name"] for tool in reply["result"]["tools"]]
        async with http.delete(url, headers=headers) as response:
            assert response.status == 200
        return version, names


async def _legacy_sse_handshake(url: str) -> tuple[str, list[str]]:
    """The 2024-11-05 HTTP+SSE transport: GET the stream, POST to its endpoint, replies come back on it."""
    async with (
        aiohttp.ClientSession(timeout=TIMEOUT) as http,
        http.get(url, headers={"Accept": "text/event-stream"}) as stream,
    ):
        assert stream.status == 200
        event = ""
        endpoint = ""
        async for raw in stream.content:
            line = raw.decode().rstrip("\r\n")
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:") and event == "endpoint":
                endpoint = str(stream.url.join(URL(line[5:].strip())))
                break
        assert endpoint, "no endpoint event"
        messages = _sse_messages(stream)

        async def call(body: dict[str, Any]) -> dict[str, Any] | None:
            async with http.post(endpoint, json=body) as response:
                assert response.status in (200, 202), await response.text()
            if "id" not in body:
                return None
            async for message in messages:
                if message.get("id") == body["id"] and "method" not in message:
                    return message
            raise AssertionError(f"no reply to {body['method']}")

        reply = await call(_initialize(1, "2024-11-05"))
        assert reply is not None
        await call({"jsonrpc": "2.0", "method": "notifications/initialized"})
        listed = await call({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        assert listed is not None
        return reply["result"]["protocolVersion"], [tool["name"] for tool in listed["result"]["tools"]]


def _tcp_listeners(port: int) -> list[tuple[str, str]]:
    """(family, local address hex) of LISTEN sockets on ``port``, from /proc/net/tcp{,6}."""
    found: list[tuple[str, str]] = []
    for family in ("tcp", "tcp6"):
        table = Path("/proc/net") / family
        if not table.exists():
            continue
        for row in table.read_text().splitlines()[1:]:
            fields = row.split()
            address, port_hex = fields[1].rsplit(":", 1)
            if int(port_hex, 16) == port and fields[3] == "0A":  # 0A = LISTEN
                found.append((family, address))
    return found


def _assert_loopback_only(port: int) -> None:
    if not Path("/proc/net/tcp").exists():
        return
    listeners = _tcp_listeners(port)
    assert listeners, f"nothing listens on port {port}"
    assert listeners == [("tcp", "0100007F")], f"port {port} is not bound to 127.0.0.1 only: {listeners}"


async def _assert_stopped(peer: peers.PeerProcess) -> None:
    assert peer.returncode is not None, "peer still running after its context closed"
    with pytest.raises(OSError):
        _, writer = await asyncio.open_connection(peers.LOOPBACK, peer.port)
        writer.close()


StarterFactory = Callable[[], AbstractAsyncContextManager[peers.PeerUrl]]


@pytest.mark.peers
@pytest.mark.parametrize(
    ("starter", "expected_tools"),
    [
        pytest.param(peers.start_fastmcp, FASTMCP_TOOLS, id="fastmcp"),
        pytest.param(lambda: peers.start_fastmcp(event_store=True), FASTMCP_TOOLS, id="fastmcp-event-store"),
        pytest.param(peers.start_server_everything, {"echo", *EVERYTHING_CONDITIONAL_TOOLS}, id="everything"),
    ],
)
async def test_streamable_http_peer(starter: StarterFactory, expected_tools: set[str]) -> None:
    async with starter() as url:
        peer = url.peer
        assert url == f"http://127.0.0.1:{peer.port}/mcp"
        _assert_loopback_only(peer.port)
        version, names = await _streamable_http_handshake(url)
        assert version == "2025-11-25"
        assert expected_tools <= set(names), sorted(set(expected_tools) - set(names))
    await _assert_stopped(peer)


@pytest.mark.peers
@pytest.mark.parametrize(
    "starter",
    [
        pytest.param(lambda: peers.start_fastmcp("sse"), id="fastmcp"),
        pytest.param(lambda: peers.start_server_everything("sse"), id="everything"),
    ],
)
async def test_legacy_sse_peer(starter: StarterFactory) -> None:
    async with starter() as url:
        peer = url.peer
        assert url == f"http://127.0.0.1:{peer.port}/sse"
        _assert_loopback_only(peer.port)
        version, names = await _legacy_sse_handshake(url)
        assert version == "2024-11-05"
        assert "echo" in names
    await _assert_stopped(peer)


@pytest.mark.peers
async def test_module_fixtures(fastmcp_url: peers.PeerUrl, server_everything_url: peers.PeerUrl) -> None:
    assert fastmcp_url.peer.returncode is None
    assert server_everything_url.peer.returncode is None
    _, names = await _streamable_http_handshake(fastmcp_url)
    assert "ask_name" in names


@pytest.mark.peers
async def test_peer_stopped_when_the_test_body_fails() -> None:
    with pytest.raises(RuntimeError, match="test body failed"):
        async with peers.start_fastmcp() as url:
            peer = url.peer
            raise RuntimeError("test body failed")
    await _assert_stopped(peer)


# ---- the harness's own failure paths (no peers needed) --------------------------------------------


async def test_peer_that_dies_reports_its_output() -> None:
    script = "import sys; print('fixture exploded', file=sys.stderr); sys.exit(3)"
    with pytest.raises(peers.PeerStartError, match=r"(?s)exited with code 3.*fixture exploded"):
        async with peers.run_peer("dies", lambda _port: [sys.executable, "-c", script]):
            pass


async def test_peer_that_never_listens_times_out_and_is_killed() -> None:
    script = "import time; print('still booting', flush=True); time.sleep(60)"

    async def attempt() -> None:
        async with peers.run_peer("silent", lambda _port: [sys.executable, "-c", script], ready_timeout=1.0):
            pass

    with pytest.raises(peers.PeerStartError, match=r"(?s)within 1s.*still booting") as failure:
        await asyncio.wait_for(attempt(), timeout=15)
    assert "pid" in str(failure.value)


async def test_stop_escalates_to_sigkill() -> None:
    script = (
        "import signal, socket, sys, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "s = socket.socket(); s.bind(('127.0.0.1', int(sys.argv[1]))); s.listen()\n"
        "time.sleep(60)\n"
    )
    async with peers.run_peer(
        "stubborn", lambda port: [sys.executable, "-c", script, str(port)], stop_timeout=0.5
    ) as peer:
        assert peer.returncode is None
    assert peer.returncode == -9


async def test_missing_peers_fail_with_setup_hint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MRTR_PEERS_DIR", str(tmp_path / "nowhere"))
    assert len(peers.missing_peers()) == 4
    with pytest.raises(peers.PeersMissingError, match=r"scripts/setup-peers\.sh"):
        async with peers.start_fastmcp():
            pass
    with pytest.raises(peers.PeersMissingError, match=r"scripts/setup-peers\.sh"):
        async with peers.start_server_everything():
            pass


async def test_run_once_kills_on_time_limit() -> None:
    done = await peers.run_once([sys.executable, "-c", "print('hi')"], limit_s=10)
    assert (done.returncode, done.stdout.strip(), done.timed_out) == (0, "hi", False)
    slow = await peers.run_once([sys.executable, "-c", "import time; time.sleep(30)"], limit_s=0.5)
    assert slow.timed_out
    assert slow.returncode == -9
