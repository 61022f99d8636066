"""The standalone GET stream's own protocol (proxy/upstream/event_stream.py) against FastMCP 1.30 and
server-everything: it carries the server's `roots/list` (which both send on the standalone stream),
`close()` really hangs up (FastMCP accepts one standalone stream per session and takes a new one at once),
and what ends a stream is told as a reason, never raised into the loop. Then against a scripted raw server
that frames its response badly on purpose: each bad framing ends the stream with llhttp's reason, after the
events that came before it, and a response dribbled a byte at a time reads whole."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator

import aiohttp
import peers
import pytest
import pytest_asyncio
from waiting import eventually

from proxy.upstream.event_stream import EventHandler, EventStream, StreamEnded, open_event_stream
from proxy.wire.http1 import ResponseHead
from proxy.wire.sse import SSEEvent

pytestmark = pytest.mark.asyncio(loop_scope="session")

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


@pytest.mark.peers
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

    async def taken() -> bool:
        again, head = await _open(url, {**headers, "Accept": "text/event-stream"})
        again.close()
        return bool(head.status == 200)

    await eventually(taken, "a second standalone stream once the first is gone")


@pytest.mark.peers
async def test_an_unknown_session_and_a_dead_port_end_with_a_reason(
    session: tuple[str, aiohttp.ClientSession, dict[str, str]],
) -> None:
    url, _, headers = session
    stream, head = await _open(url, {**headers, "Mcp-Session-Id": "no-such-session"})
    stream.close()
    assert head.status == 404  # the caller's cue that the session is gone
    with pytest.raises(OSError):
        await _open(f"http://127.0.0.1:{peers.closed_port()}/mcp", {})
    with pytest.raises(StreamEnded, match="cannot be sent"):
        await _open(url, {"X-Bad": "a\r\nb"})


@pytest.mark.peers
async def test_server_everythings_roots_request_comes_on_the_stream_with_its_event_id() -> None:
    """server-everything sends `roots/list` on the standalone stream 350 ms after `initialized`; every event
    on it carries an id."""
    async with peers.start_server_everything() as url, aiohttp.ClientSession() as http:
        params = {
            "protocolVersion": VERSION,
            "capabilities": {"roots": {}},
            "clientInfo": {"name": "t", "version": "1"},
        }
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}
        async with http.post(str(url), json=init, headers=JSON) as r:
            await r.read()
            headers = {"Mcp-Session-Id": r.headers["Mcp-Session-Id"], "MCP-Protocol-Version": VERSION}
        events: asyncio.Queue[SSEEvent] = asyncio.Queue()
        stream, head = await _open(str(url), {**headers, "Accept": "text/event-stream"}, events.put_nowait)
        try:
            assert head.status == 200
            note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            async with http.post(str(url), json=note, headers={**JSON, **headers}) as r:
                assert r.status == 202
            seen: list[SSEEvent] = []
            async with asyncio.timeout(10):  # notifications (tools/list_changed…) may come first
                while not seen or json.loads(seen[-1].data).get("method") != "roots/list":
                    seen.append(await events.get())
            assert all(e.id for e in seen)
        finally:
            stream.close()


# -- a scripted server that frames its responses badly on purpose -------------------------------------------

SSE_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


EVENT = _chunk(b'data: {"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info"}}\n\n')


@contextlib.asynccontextmanager
async def scripted(pieces: list[bytes], *, dribble: bool = False) -> AsyncIterator[tuple[str, list[bytes]]]:
    """A raw HTTP server on 127.0.0.1 that reads a request head and writes `pieces` (with `dribble`, a byte
    at a time), then holds the connection until the client hangs up. Yields its URL and the request heads
    it received."""
    heads: list[bytes] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(10):
                heads.append(await reader.readuntil(b"\r\n\r\n"))
                for piece in pieces:
                    for part in [piece[i : i + 1] for i in range(len(piece))] if dribble else [piece]:
                        writer.write(part)
                        await writer.drain()
                        if dribble:
                            await asyncio.sleep(0.001)  # its own segment, most of the time
                await reader.read()  # until the client closes
        except (OSError, TimeoutError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/mcp", heads
    finally:
        server.close()
        async with asyncio.timeout(5):
            await server.wait_closed()


async def _events_then_end(url: str) -> tuple[ResponseHead, list[SSEEvent], str]:
    events: list[SSEEvent] = []
    stream, head = await _open(url, {"Accept": "text/event-stream"}, events.append)
    try:
        async with asyncio.timeout(10):
            why = await stream.ended
    finally:
        stream.close()
    return head, events, why


@pytest.mark.parametrize(
    ("after", "reason"),
    [
        (b"zz\r\n", "Invalid character in chunk size"),
        (b"3 \r\nabc\r\n", "Invalid character in chunk size"),
        (b"ffffffffffffffffffff\r\n", "Chunk size overflow"),
        (b"3\r\nabcdef\r\n", "Expected LF after chunk data"),
        (b"3;" + b"x" * 100_000, "chunk framing too large"),
    ],
)
async def test_a_bad_chunk_ends_the_stream_after_the_events_before_it(after: bytes, reason: str) -> None:
    async with scripted([SSE_HEAD, EVENT, EVENT, after]) as (url, _):
        head, events, why = await _events_then_end(url)
    assert head.status == 200 and len(events) == 2
    assert reason in why


@pytest.mark.parametrize(
    ("head", "reason"),
    [
        (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", "Duplicate Content-Length"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", "can't be present"),
        (b"HTTP/1.1 200 OK\r\nX-A: 1\r\n folded\r\n\r\n", "Unexpected whitespace"),  # obs-fold
        (b"HTTP/1.1 200 OK\r\n" + b"X-Flood: 1\r\n" * 200 + b"\r\n", "more than 128 header fields"),
        (b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * 100_000, "header field too long|response head too large"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", "unsupported Transfer-Encoding"),
        (
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: upgrade\r\n\r\n",
            "switched",
        ),
        (b"SSH-2.0-OpenSSH_9.6\r\n", "Expected HTTP/"),
    ],
)
async def test_a_head_that_cannot_be_read_safely_never_opens_the_stream(head: bytes, reason: str) -> None:
    async with scripted([head]) as (url, _):
        with pytest.raises(StreamEnded, match=reason):
            await _open(url, {"Accept": "text/event-stream"})


async def test_a_response_dribbled_a_byte_at_a_time_reads_whole_and_the_request_was_sent_as_asked() -> None:
    async with scripted([SSE_HEAD, EVENT, _chunk(b"id: 7\ndata: {}\n\n")], dribble=True) as (url, heads):
        events: asyncio.Queue[SSEEvent] = asyncio.Queue()
        stream, head = await _open(
            url, {"Accept": "text/event-stream", "Mcp-Session-Id": "s1"}, events.put_nowait
        )
        try:
            async with asyncio.timeout(10):
                first, second = await events.get(), await events.get()
        finally:
            stream.close()
    assert (head.status, head.get("transfer-encoding")) == (200, "chunked")
    assert '"notifications/message"' in first.data and (second.id, second.data) == ("7", "{}")
    assert stream.ended.result() == ""  # ended by us
    host = url.split("/")[2]
    assert heads[0].startswith(f"GET /mcp HTTP/1.1\r\nHost: {host}\r\n".encode())
    assert b"\r\nMcp-Session-Id: s1\r\n" in heads[0]


async def test_a_content_length_body_ends_the_stream_when_it_is_read() -> None:
    body = b"data: {}\n\n"
    async with scripted([b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body + b"junk"]) as (
        url,
        _,
    ):
        _, events, why = await _events_then_end(url)
    assert ([e.data for e in events], why) == (["{}"], "the server ended the response")
