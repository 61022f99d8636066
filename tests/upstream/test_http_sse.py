"""The 2024-11-05 HTTP+SSE upstream session: endpoint resolution, and the session against an in-process fake
server (one GET stream, POSTs answered 202) — above all, that a stream which ends is never reconnected."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import peers
import pytest
import pytest_asyncio
from aiohttp import web
from aiohttp.test_utils import TestServer
from waiting import eventually

from proxy.upstream.base import Inbox, NotDelivered, TransportLost, UpstreamError
from proxy.upstream.http_sse import LOST_REASON, HttpSseSession, resolve_endpoint
from proxy.upstream.streamable_http import SessionSettings
from proxy.wire import jsonrpc

SSE = "http://127.0.0.1:5000/sse"

# -- endpoint resolution (pure) ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("base", "data", "expected"),
    [
        (SSE, "/messages/?session_id=abc123", "http://127.0.0.1:5000/messages/?session_id=abc123"),  # FastMCP
        (SSE, "/message?sessionId=1b2c-3d", "http://127.0.0.1:5000/message?sessionId=1b2c-3d"),  # everything
        (SSE, "message?sessionId=x", "http://127.0.0.1:5000/message?sessionId=x"),  # relative to the path
        ("http://127.0.0.1:5000/api/sse", "message?s=1", "http://127.0.0.1:5000/api/message?s=1"),
        ("http://127.0.0.1:5000/api/sse", "/message?s=1", "http://127.0.0.1:5000/message?s=1"),
        (SSE, "  /messages/?session_id=a\n", "http://127.0.0.1:5000/messages/?session_id=a"),  # whitespace
        (SSE, "http://127.0.0.1:5000/m?s=1", "http://127.0.0.1:5000/m?s=1"),  # absolute, same origin
        ("http://localhost/sse", "http://LOCALHOST:80/m", "http://localhost/m"),  # default port, host case
        (SSE, "/m?x=%2B%20a", "http://127.0.0.1:5000/m?x=%2B%20a"),  # escapes kept
        (SSE, "/m?s=1#frag", "http://127.0.0.1:5000/m?s=1"),
    ],
)
def test_endpoint_is_resolved_against_the_sse_url(base: str, data: str, expected: str) -> None:
    assert resolve_endpoint(base, data) == expected


@pytest.mark.parametrize(
    "data",
    [
        "http://127.0.0.2:5000/messages",  # other host
        "http://127.0.0.1:5001/messages",  # other port
        "https://127.0.0.1:5000/messages",  # other scheme
        "//evil.example/messages",  # scheme-relative: another host
        "http://evil.example/messages?session_id=1",
        "javascript:alert(1)",
        "file:///etc/passwd",
    ],
)
def test_endpoint_on_another_origin_is_refused(data: str) -> None:
    with pytest.raises(UpstreamError, match="another origin"):
        resolve_endpoint(SSE, data)


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ("", "empty"),
        ("   \n", "empty"),
        ("http://user:pw@127.0.0.1:5000/messages", "credentials"),
    ],
)
def test_unusable_endpoints_are_refused(data: str, problem: str) -> None:
    with pytest.raises(UpstreamError, match=problem):
        resolve_endpoint(SSE, data)


# -- a fake 2024-11-05 server ------------------------------------------------------------------------------


@dataclass
class FakeServer:
    """`GET /sse` → (optional `retry:`) `endpoint` event, then whatever the test queues (None ends the
    stream). `POST /messages/` → 202; `initialize` and `tools/list` are answered on the stream."""

    endpoint: str | None = "/messages/?session_id=s1"
    version: str = "2024-11-05"
    retry_ms: int | None = None
    get_status: int = 200
    gets: list[dict[str, str]] = field(default_factory=list)
    posts: list[tuple[dict[str, Any], dict[str, str]]] = field(default_factory=list)
    streams: list[asyncio.Queue[str | None]] = field(default_factory=list)
    post_status: int = 202

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/sse", self._sse)
        app.router.add_post("/messages/", self._message)
        return app

    def push(self, message: dict[str, Any] | str | None) -> None:
        """Send on the latest stream: a JSON-RPC message, raw event text, or None to end the stream."""
        data = json.dumps(message) if isinstance(message, dict) else message
        self.streams[-1].put_nowait(data)

    def end_all(self) -> None:
        for queue in self.streams:
            queue.put_nowait(None)

    def received(self, method: str) -> list[dict[str, Any]]:
        return [body for body, _ in self.posts if body.get("method") == method]

    async def _sse(self, request: web.Request) -> web.StreamResponse:
        self.gets.append(dict(request.headers))
        if self.get_status != 200:
            return web.Response(status=self.get_status, text="no")
        queue: asyncio.Queue[str | None] = asyncio.Queue()
        self.streams.append(queue)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await resp.prepare(request)
        if self.retry_ms is not None:
            await resp.write(f"retry: {self.retry_ms}\n\n".encode())
        if self.endpoint is not None:
            await resp.write(f"event: endpoint\ndata: {self.endpoint}\n\n".encode())
        while (item := await queue.get()) is not None:
            if item.startswith(("event:", ":", "id:")):
                await resp.write(item.encode())
            else:
                await resp.write(f"event: message\ndata: {item}\n\n".encode())
        return resp

    async def _message(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.posts.append((body, dict(request.headers)))
        if self.post_status != 202:
            return web.Response(status=self.post_status, text="Could not find session")
        if body.get("method") == "initialize":
            result = {
                "protocolVersion": self.version,
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "fake", "version": "1"},
            }
            self.push({"jsonrpc": "2.0", "id": body["id"], "result": result})
        elif body.get("method") == "tools/list":
            self.push({"jsonrpc": "2.0", "id": body["id"], "result": {"tools": []}})
        return web.Response(status=202, text="Accepted")


@dataclass
class Running:
    server: FakeServer
    url: str
    http: aiohttp.ClientSession

    def session(self, versions: tuple[str, ...] = ("2025-11-25", "2024-11-05"), **kw: Any) -> HttpSseSession:
        settings = SessionSettings(
            url=self.url,
            versions=versions,
            capabilities={"sampling": {}},
            headers={"Authorization": "Bearer t0ken"},
            initialize_timeout=kw.pop("initialize_timeout", 5.0),
            max_message_bytes=kw.pop("max_message_bytes", 16 * 1024 * 1024),
        )
        return HttpSseSession(self.http, settings, kw.pop("no_call", _refuse))


def _refuse(req: jsonrpc.Request) -> jsonrpc.Response:
    return jsonrpc.error(req.id, jsonrpc.INVALID_PARAMS, "no call in flight")


@pytest_asyncio.fixture(loop_scope="session")
async def fake() -> AsyncIterator[Running]:
    server = FakeServer()
    test_server = TestServer(server.app(), host="127.0.0.1")
    await test_server.start_server()
    http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None, sock_connect=5))
    try:
        yield Running(server, str(test_server.make_url("/sse")), http)
    finally:
        await http.close()
        server.end_all()
        await test_server.close()


async def _next(inbox: Inbox, timeout: float = 5.0) -> Any:
    async with asyncio.timeout(timeout):
        return await inbox.get()


# -- the session ------------------------------------------------------------------------------------------


async def test_open_negotiates_and_posts_to_the_endpoint_without_streamable_headers(fake: Running) -> None:
    session = fake.session()
    try:
        await session.open()
        assert session.alive
        assert session.info.protocol_version == "2024-11-05"  # offered 2025-11-25, the server answered this
        assert session.info.server_info["name"] == "fake"
        assert session.last_event_id is None
        assert session.session_id is not None and "s1" not in session.session_id  # never the endpoint
        reply = await session.request("tools/list", {}, timeout=5)
        assert isinstance(reply, jsonrpc.Result) and reply.result == {"tools": []}
    finally:
        await session.close()
    server = fake.server
    assert [b["method"] for b, _ in server.posts] == ["initialize", "notifications/initialized", "tools/list"]
    (init,) = server.received("initialize")
    assert init["params"]["protocolVersion"] == "2025-11-25"
    assert init["params"]["capabilities"] == {"sampling": {}}
    for headers in [server.gets[0]] + [h for _, h in server.posts]:
        lowered = {k.lower() for k in headers}
        assert "mcp-session-id" not in lowered and "mcp-protocol-version" not in lowered
        assert headers["Authorization"] == "Bearer t0ken"
    assert server.gets[0]["Accept"] == "text/event-stream"
    assert len(server.gets) == 1


async def test_stream_end_kills_the_session_and_is_never_reconnected(fake: Running) -> None:
    fake.server.retry_ms = 1  # the server asks for a fast reconnect: it must still not happen
    session = fake.session()
    try:
        await session.open()
        inbox: Inbox = Inbox()
        rid = await session.call("tools/call", {"name": "slow", "arguments": {}}, inbox)
        plain = asyncio.create_task(session.request("prompts/list", {}, timeout=30))  # never answered
        await eventually(lambda: fake.server.received("prompts/list"), "the prompts/list to reach the server")
        assert fake.server.received("tools/call")[0]["id"] == rid
        fake.server.push(None)  # answer nothing, end the stream
        lost = await _next(inbox)
        assert isinstance(lost, TransportLost)
        assert LOST_REASON in lost.reason and "cannot be resumed" in lost.reason
        with pytest.raises(UpstreamError, match="cannot be resumed"):
            async with asyncio.timeout(5):
                await plain
        assert not session.alive
        with pytest.raises(UpstreamError, match="cannot be resumed"):
            await session.send(jsonrpc.Notification("notifications/cancelled", {"requestId": rid}))
        await asyncio.sleep(
            0.5
        )  # a negative check: time enough for the library's reconnect, had it not been disabled
    finally:
        await session.close()
    assert len(fake.server.gets) == 1  # one GET ever
    assert len(fake.server.received("tools/call")) == 1  # nothing re-sent
    assert fake.server.received("notifications/cancelled") == []  # a dead session is not POSTed to


async def test_stream_end_with_no_call_marks_the_session_dead(fake: Running) -> None:
    session = fake.session()
    try:
        await session.open()
        fake.server.push(None)
        await eventually(lambda: not session.alive, "the session to end")
        with pytest.raises(UpstreamError, match="cannot be resumed"):
            await session.request("tools/list", {}, timeout=5)
    finally:
        await session.close()
    assert len(fake.server.gets) == 1


async def test_all_messages_of_the_call_go_to_its_inbox_and_session_wide_ones_do_not(fake: Running) -> None:
    session = fake.session()
    try:
        await session.open()
        inbox: Inbox = Inbox()
        rid = await session.call("tools/call", {"name": "t", "arguments": {}}, inbox)
        await eventually(lambda: fake.server.received("tools/call"), "the tools/call to reach the server")
        fake.server.push({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
        fake.server.push({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}})
        fake.server.push({"jsonrpc": "2.0", "id": 0, "method": "sampling/createMessage", "params": {}})
        fake.server.push("event: other\ndata: ignored\n\n")  # unknown event types are ignored
        fake.server.push("event: message\ndata: not json\n\n")  # and so are bad messages
        fake.server.push({"jsonrpc": "2.0", "id": rid, "result": {"content": []}})
        progress, request, result = [await _next(inbox) for _ in range(3)]
        assert isinstance(progress, jsonrpc.Notification) and progress.method == "notifications/progress"
        assert isinstance(request, jsonrpc.Request) and request.method == "sampling/createMessage"
        assert isinstance(result, jsonrpc.Result) and result.id == rid
        assert inbox.empty()
        await session.send(jsonrpc.Result(0, {"role": "assistant"}))
        session.end_call()
        assert session.alive
    finally:
        await session.close()
    assert {"jsonrpc": "2.0", "id": 0, "result": {"role": "assistant"}} in [b for b, _ in fake.server.posts]


async def test_server_request_with_no_call_gets_the_no_call_answer(fake: Running) -> None:
    session = fake.session(no_call=lambda req: jsonrpc.Result(req.id, {"roots": []}))
    try:
        await session.open()
        fake.server.push({"jsonrpc": "2.0", "id": 7, "method": "roots/list"})
        await eventually(
            lambda: any(b.get("id") == 7 for b, _ in fake.server.posts),
            "the answer to request 7 to be POSTed",
        )
    finally:
        await session.close()
    assert {"jsonrpc": "2.0", "id": 7, "result": {"roots": []}} in [b for b, _ in fake.server.posts]


async def test_a_message_larger_than_aiohttps_default_line_limit_arrives(fake: Running) -> None:
    session = fake.session()
    try:
        await session.open()
        inbox: Inbox = Inbox()
        rid = await session.call("tools/call", {"name": "big", "arguments": {}}, inbox)
        text = "x" * (2 * 1024 * 1024)  # one 2 MiB `data:` line (aiohttp's default limit is 512 KiB)
        fake.server.push(
            {"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": text}]}}
        )
        result = await _next(inbox)
        assert isinstance(result, jsonrpc.Result) and result.result["content"][0]["text"] == text
        assert session.alive
    finally:
        await session.close()


@pytest.mark.parametrize("shape", ["one line", "many data lines"])
async def test_a_message_over_max_message_bytes_fails_the_call_and_ends_the_session(
    fake: Running, shape: str
) -> None:
    session = fake.session(max_message_bytes=64 * 1024)
    try:
        await session.open()
        inbox: Inbox = Inbox()
        await session.call("tools/call", {"name": "big", "arguments": {}}, inbox)
        if shape == "one line":
            fake.server.push("event: message\ndata: " + "x" * (200 * 1024) + "\n\n")
        else:  # an event whose data lines the library would join without limit
            fake.server.push("event: message\n" + "data: xxxxxxxx\n" * 20_000 + "\n")
        lost = await _next(inbox)
        assert isinstance(lost, TransportLost)
        limit = "upstream sent a message larger than 65536 bytes (upstreams[].max_message_bytes)"
        assert lost.reason == limit
        assert not session.alive
    finally:
        await session.close()


async def test_a_flood_of_server_requests_is_answered_in_turn_and_bounded(fake: Running) -> None:
    session = fake.session()
    try:
        await session.open()
        inbox: Inbox = Inbox()
        await session.call("tools/call", {"name": "slow", "arguments": {}}, inbox)
        for i in range(1000):  # nobody drives the call: its inbox fills, then the rest are refused
            fake.server.push({"jsonrpc": "2.0", "id": f"r-{i}", "method": "ping"})
        await eventually(
            lambda: len([b for b, _ in fake.server.posts if "error" in b]) == 1000 - 256,
            "an error POSTed for each refused request",
            20,
        )
        assert inbox.qsize() == 256
        refused = [b for b, _ in fake.server.posts if "error" in b]
        assert refused[0]["id"] == "r-256"
        assert refused[0]["error"] == {
            "code": -31003,
            "message": "Too many requests: the call already has 256 messages waiting in the proxy",
        }
        assert session.alive
    finally:
        await session.close()


async def test_a_burst_of_notifications_never_costs_the_call_a_request(fake: Running) -> None:
    session = fake.session()
    try:
        await session.open()
        inbox: Inbox = Inbox()
        await session.call("tools/call", {"name": "slow", "arguments": {}}, inbox)
        for i in range(1000):  # nobody reads them: half the inbox, then dropped
            fake.server.push(
                {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": i}}
            )
        fake.server.push({"jsonrpc": "2.0", "id": "q", "method": "ping"})
        await eventually(lambda: inbox.qsize() == 129, "129 messages in the inbox")
        items = [inbox.get_nowait() for _ in range(129)]
        assert [n.params["progress"] for n in items[:128]] == list(range(128))
        assert isinstance(items[128], jsonrpc.Request) and items[128].id == "q"
        assert not [b for b, _ in fake.server.posts if "error" in b]
    finally:
        await session.close()


async def test_endpoint_on_another_origin_fails_open(fake: Running) -> None:
    fake.server.endpoint = "http://127.0.0.2:9/messages/?session_id=s1"
    session = fake.session()
    try:
        with pytest.raises(UpstreamError, match="another origin"):
            await session.open()
    finally:
        await session.close()
    assert fake.server.posts == []


async def test_missing_endpoint_event_is_bounded(fake: Running) -> None:
    fake.server.endpoint = None
    session = fake.session(initialize_timeout=0.3)
    try:
        with pytest.raises(UpstreamError, match=r"no endpoint event within 0\.3s"):
            async with asyncio.timeout(5):
                await session.open()
    finally:
        await session.close()
    assert len(fake.server.gets) == 1


async def test_stream_ending_before_the_endpoint_fails_open_without_reconnecting(fake: Running) -> None:
    fake.server.endpoint = None
    session = fake.session()
    try:
        opening = asyncio.create_task(session.open())
        await eventually(lambda: bool(fake.server.streams), "the SSE stream to open")
        fake.server.push(None)
        with pytest.raises(UpstreamError, match="before sending its endpoint"):
            async with asyncio.timeout(5):
                await opening
    finally:
        await session.close()
    assert len(fake.server.gets) == 1


async def test_http_error_on_get_fails_open(fake: Running) -> None:
    fake.server.get_status = 404
    session = fake.session()
    try:
        with pytest.raises(UpstreamError, match="answered HTTP 404"):
            async with asyncio.timeout(5):
                await session.open()
    finally:
        await session.close()
    assert len(fake.server.gets) == 1


async def test_unreachable_server_fails_open_at_once() -> None:
    async with aiohttp.ClientSession() as http:
        url = f"http://127.0.0.1:{peers.closed_port()}/sse"  # nothing listens there
        settings = SessionSettings(url=url, versions=("2024-11-05",), capabilities={})
        session = HttpSseSession(http, settings, _refuse)
        try:
            with pytest.raises(UpstreamError, match="could not open the SSE stream"):
                async with asyncio.timeout(3):  # no connect retries with backoff
                    await session.open()
        finally:
            await session.close()


async def test_post_404_means_the_session_is_gone(fake: Running) -> None:
    session = fake.session()
    try:
        await session.open()
        fake.server.post_status = 404
        with pytest.raises(UpstreamError, match="HTTP 404"):
            await session.request("tools/list", {}, timeout=5)
        assert not session.alive
    finally:
        await session.close()


async def test_version_not_offered_is_refused(fake: Running) -> None:
    fake.server.version = "2024-11-05"
    session = fake.session(versions=("2025-11-25",))
    try:
        with pytest.raises(UpstreamError, match="unsupported version '2024-11-05'"):
            await session.open()
    finally:
        await session.close()


async def test_a_call_cannot_be_taken_over(fake: Running) -> None:
    session = fake.session()
    try:
        await session.open()
        with pytest.raises(UpstreamError, match="cannot be taken over"):
            await session.resume_call(Inbox(), 1, "ev-1")
        assert session.alive
    finally:
        await session.close()


async def test_nothing_sent_on_a_dead_session_is_marked_not_delivered(fake: Running) -> None:
    """A request that never left (the stream had already ended) may safely be sent on a fresh session."""
    session = fake.session()
    try:
        await session.open()
        fake.server.push(None)
        await eventually(lambda: not session.alive, "the session to end")
        with pytest.raises(NotDelivered):
            await session.request("tools/list", {}, timeout=5)
        inbox: Inbox = Inbox()
        await session.call("tools/call", {"name": "t", "arguments": {}}, inbox)
        lost = await _next(inbox)
        assert isinstance(lost, TransportLost) and lost.delivered is False
    finally:
        await session.close()
    assert fake.server.received("tools/call") == []


async def test_a_call_cut_off_after_it_was_accepted_counts_as_delivered(fake: Running) -> None:
    session = fake.session()
    try:
        await session.open()
        inbox: Inbox = Inbox()
        await session.call("tools/call", {"name": "t", "arguments": {}}, inbox)
        await eventually(
            lambda: bool(fake.server.received("tools/call")), "the tools/call to reach the server"
        )
        fake.server.push(None)
        lost = await _next(inbox)
        assert isinstance(lost, TransportLost) and lost.delivered is True  # it may be running: never re-sent
    finally:
        await session.close()


async def test_post_404_means_not_delivered(fake: Running) -> None:
    session = fake.session()
    try:
        await session.open()
        fake.server.post_status = 404
        with pytest.raises(NotDelivered, match="HTTP 404"):
            await session.request("tools/list", {}, timeout=5)
    finally:
        await session.close()
