"""The standalone GET stream's own protocol (proxy/upstream/event_stream.py) against FastMCP 1.30: it carries
the server's `roots/list` (which FastMCP 1.x sends on the standalone stream), `close()` really hangs up (the
server accepts one standalone stream per session and takes a new one at once), and what ends a stream is
told as a reason, never raised into the loop."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import aiohttp
import peers
import pytest
import pytest_asyncio

from proxy.upstream.event_stream import EventHandler, EventStream, StreamEnded, open_event_stream
from proxy.wire.http1 import ResponseHead
from proxy.wire.sse import SSEEvent

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session")]

VERSION = "2025-11-25"
JSON = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


async def _open(
    url: str, headers: dict[str, str], on_event: EventHandler = lambda _: None
) -> tuple[EventStream, ResponseHead]:
    return await open_event_stream(url, headers, on_event, tls=None, connect_timeout=5, head_timeout=5)


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def session() -> AsyncIterator[tuple[str, aiohttp.ClientSession, dict[str, str]]]:
    """A legacy session on FastMCP 1.30 that declares roots: its URL, an HTTP client, its headers."""
    async with peers.start_fastmcp() as url, aiohttp.ClientSession() as http:
        params = {"protocolVersion": VERSION, "capabilities": {"roots": {}}, "clientInfo": {"name": "t"}}
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}
        async with http.post(url, json=init, headers=JSON) as r:
            await r.read()
            headers = {"Mcp-Session-Id": r.headers["Mcp-Session-Id"], "MCP-Protocol-Version": VERSION}
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        async with http.post(url, json=note, headers={**JSON, **headers}) as r:
            assert r.status == 202
        yield str(url), http, headers


async def test_the_stream_carries_the_servers_roots_request_and_close_hangs_up(
    session: tuple[str, aiohttp.ClientSession, dict[str, str]],
) -> None:
    url, http, headers = session
    events: asyncio.Queue[SSEEvent] = asyncio.Queue()
    stream, head = await _open(url, {**headers, "Accept": "text/event-stream"}, events.put_nowait)
    try:
        assert (head.status, head.get("content-type").split(";")[0]) == (200, "text/event-stream")
        call = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "roots", "arguments": {}},
        }
        answer = asyncio.ensure_future(http.post(url, json=call, headers={**JSON, **headers}))
        async with asyncio.timeout(10):
            while not (event := await events.get()).data.strip():
                pass  # a priming event, if any
        ask = json.loads(event.data)
        assert ask["method"] == "roots/list"  # on the standalone stream, as FastMCP 1.x sends it
        reply = {"jsonrpc": "2.0", "id": ask["id"], "result": {"roots": [{"uri": "file:///tmp/a"}]}}
        async with http.post(url, json=reply, headers={**JSON, **headers}) as r:
            assert r.status == 202
        async with await answer as r:
            assert "file:///tmp/a" in await r.text()
    finally:
        stream.close()
    assert stream.ended.result() == ""  # ended by us
    # The server holds one standalone stream per session: a second one is taken only once the first is gone.
    for _ in range(50):
        again, head = await _open(url, {**headers, "Accept": "text/event-stream"})
        again.close()
        if head.status == 200:
            break
        await asyncio.sleep(0.1)
    assert head.status == 200


async def test_an_unknown_session_and_a_dead_port_end_with_a_reason(
    session: tuple[str, aiohttp.ClientSession, dict[str, str]],
) -> None:
    url, _, headers = session
    stream, head = await _open(url, {**headers, "Mcp-Session-Id": "no-such-session"})
    stream.close()
    assert head.status == 404  # the caller's cue that the session is gone
    with pytest.raises(OSError):
        await _open(f"http://127.0.0.1:{peers.free_port()}/mcp", {})
    with pytest.raises(StreamEnded, match="cannot be sent"):
        await _open(url, {"X-Bad": "a\r\nb"})
