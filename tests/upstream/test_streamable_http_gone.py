"""A legacy Streamable HTTP session whose server forgets it while a call's POST is in flight: the call's own
POST decides what the call learns, not the session's GET stream (issue 43's race, found by the era-swap
matrix). The scripted server holds the call's POST, ends the standalone GET stream and answers its re-open
with 404 (the session is gone: the proxy marks it dead), and only then answers the POST itself:

- with 404 too (the server restarted before it ran the call): the call hears "not delivered" first, so the
  call engine sends it again on a new session — not "may have run", which would fail a call that never ran;
- with a 200 SSE reply (the server ran it): the call goes on and gets its result;
- had the server begun answering the POST before the GET said the session is gone, the call may have run:
  it fails at once with TransportLost(delivered=True), as before (and not at its timeout).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from waiting import eventually

from proxy.upstream.base import Inbox, TransportLost
from proxy.upstream.streamable_http import SessionSettings, StreamableHttpSession
from proxy.wire import jsonrpc, mcp

GONE = {"jsonrpc": "2.0", "id": "server-error", "error": {"code": -32001, "message": "Session not found"}}


class Forgetting:
    """`initialize` opens session s-1 and its GET stream; a `tools/call` POST is held until `answer` is set
    (what to answer it with); `forget()` ends the GET stream and answers every later GET with 404. With
    `head_first`, the POST's 200 SSE head is written before it is held."""

    def __init__(self, head_first: bool = False) -> None:
        self.head_first = head_first
        self.forgotten = False
        self.gets = 0
        self.call_arrived = asyncio.Event()
        self.answer: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._stream_end = asyncio.Event()

    def forget(self) -> None:
        self.forgotten = True
        self._stream_end.set()

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if request.method == "GET":
            self.gets += 1
            if self.forgotten:
                return web.json_response(GONE, status=404)
            resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await resp.prepare(request)
            await self._stream_end.wait()
            return resp
        if request.method == "DELETE":
            return web.Response(status=404 if self.forgotten else 200)
        msg: dict[str, Any] = json.loads(await request.read())
        if msg.get("method") == "initialize":
            result = {
                "protocolVersion": msg["params"]["protocolVersion"],
                "capabilities": {},
                "serverInfo": {"name": "forgetting", "version": "1"},
            }
            reply = {"jsonrpc": "2.0", "id": msg["id"], "result": result}
            return web.json_response(reply, headers={"Mcp-Session-Id": "s-1"})
        if msg.get("method") != "tools/call":
            return web.Response(status=202)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        if self.head_first:
            await resp.prepare(request)
        self.call_arrived.set()
        how = await self.answer
        if how == "404":
            assert not self.head_first
            return web.json_response(GONE, status=404)
        if not self.head_first:
            await resp.prepare(request)
        done = {"jsonrpc": "2.0", "id": msg["id"], "result": {"content": [], "isError": False}}
        await resp.write(b"data: " + json.dumps(done).encode() + b"\n\n")
        return resp


async def _serve(script: Forgetting) -> tuple[TestServer, str]:
    app = web.Application()
    app.router.add_route("*", "/mcp", script.handle)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    return server, str(server.make_url("/mcp"))


def no_call(_: jsonrpc.Request) -> jsonrpc.Response | None:
    return None


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as client:
        yield client


@asynccontextmanager
async def _calling(
    http: aiohttp.ClientSession, script: Forgetting
) -> AsyncIterator[tuple[StreamableHttpSession, Inbox]]:
    """A session on `script`'s server with a call whose POST the server holds: (session, the call's inbox).
    Whatever the test did not answer is answered with a result at the end; session and server closed."""
    server, url = await _serve(script)
    settings = SessionSettings(url=url, versions=mcp.LEGACY_VERSIONS, capabilities={}, initialize_timeout=10)
    session = StreamableHttpSession(http, settings, no_call)
    try:
        await session.open()
        inbox: Inbox = Inbox()
        await session.call("tools/call", {"name": "slow", "arguments": {}}, inbox)
        async with asyncio.timeout(10):
            await script.call_arrived.wait()
        yield session, inbox
    finally:
        if not script.answer.done():
            script.answer.set_result("result")
        await session.close()
        await server.close()


async def _call_while_the_session_is_forgotten(
    http: aiohttp.ClientSession, script: Forgetting, answer: str
) -> list[jsonrpc.Message | TransportLost]:
    """Start a call, let the GET stream learn the session is gone while the call's POST is held, then have
    the server answer the POST with `answer`; what reached the call's inbox, in order."""
    async with _calling(http, script) as (session, inbox):
        script.forget()
        await eventually(lambda: not session.alive, "the GET stream's 404 ended the session", limit_s=10)
        script.answer.set_result(answer)
        seen: list[jsonrpc.Message | TransportLost] = []
        async with asyncio.timeout(10):
            seen.append(await inbox.get())
        while not inbox.empty():
            seen.append(inbox.get_nowait())
        return seen


async def test_a_call_refused_by_its_own_post_after_the_get_stream_said_gone_is_not_delivered(
    http: aiohttp.ClientSession,
) -> None:
    seen = await _call_while_the_session_is_forgotten(http, Forgetting(), "404")
    assert isinstance(seen[0], TransportLost), seen
    assert seen[0].delivered is False, seen  # sent again on a new session, never "may have run"


async def test_a_call_its_server_runs_after_the_get_stream_said_gone_gets_its_result(
    http: aiohttp.ClientSession,
) -> None:
    seen = await _call_while_the_session_is_forgotten(http, Forgetting(), "result")
    assert isinstance(seen[0], jsonrpc.Result), seen
    assert seen[0].result == {"content": [], "isError": False}


async def test_a_call_the_server_began_answering_may_have_run_and_fails_at_once(
    http: aiohttp.ClientSession,
) -> None:
    script = Forgetting(head_first=True)
    async with _calling(http, script) as (session, inbox):
        await eventually(lambda: session._call_heard, "the proxy read the call's 200 head", limit_s=10)
        script.forget()
        async with asyncio.timeout(10):
            lost = await inbox.get()
        assert isinstance(lost, TransportLost) and lost.delivered, lost
        assert "no longer knows the session" in lost.reason
