"""The standalone GET stream of a legacy Streamable HTTP session, against a scripted aiohttp server: no task
waits on it while it is up; when the server ends it, the session opens it again with its last event id; a
closed session closes it."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from proxy.upstream.streamable_http import SessionSettings, StreamableHttpSession
from proxy.wire import jsonrpc, mcp


class Script:
    """`initialize` answered with a session id; the first GET stream sends one event (id `e1`) and ends,
    every later one stays open until the client goes; each GET's Last-Event-ID is recorded."""

    def __init__(self) -> None:
        self.last_event_ids: list[str | None] = []
        self.open_streams = 0
        self.changed = asyncio.Event()

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if request.method == "GET":
            return await self.stream(request)
        if request.method == "DELETE":
            return web.Response(status=200)
        msg: dict[str, Any] = json.loads(await request.read())
        if msg.get("method") != "initialize":
            return web.Response(status=202)
        result = {
            "protocolVersion": msg["params"]["protocolVersion"],
            "capabilities": {},
            "serverInfo": {"name": "scripted", "version": "1"},
        }
        return web.json_response(
            {"jsonrpc": "2.0", "id": msg["id"], "result": result}, headers={"Mcp-Session-Id": "s-1"}
        )

    async def stream(self, request: web.Request) -> web.StreamResponse:
        self.last_event_ids.append(request.headers.get("Last-Event-ID"))
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        first = len(self.last_event_ids) == 1
        self.open_streams += 1
        self.changed.set()
        try:
            if first:
                await resp.write(b"id: e1\ndata: \n\n")  # a priming event: an id, no message
                return resp
            with contextlib.suppress(ConnectionError):
                while True:  # until the client goes (the transport closes under the write)
                    await asyncio.sleep(0.05)  # the scripted server: keep-alives until the client goes
                    await resp.write(b": ping\n\n")
            return resp
        finally:
            self.open_streams -= 1
            self.changed.set()

    async def until(self, check: Any, what: str) -> None:
        async with asyncio.timeout(30):
            while not check():
                self.changed.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(0.2):
                        await self.changed.wait()
        assert check(), what


@pytest.fixture
async def scripted() -> AsyncIterator[tuple[Script, str]]:
    script = Script()
    app = web.Application()
    app.router.add_route("*", "/mcp", script.handle)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        yield script, str(server.make_url("/mcp"))
    finally:
        await server.close()


def no_call(_: jsonrpc.Request) -> jsonrpc.Response | None:
    return None


async def test_an_ended_get_stream_is_opened_again_with_its_last_event_id_and_closed_with_the_session(
    scripted: tuple[Script, str],
) -> None:
    script, url = scripted
    settings = SessionSettings(url=url, versions=mcp.LEGACY_VERSIONS, capabilities={}, initialize_timeout=10)
    async with aiohttp.ClientSession() as http:
        session = StreamableHttpSession(http, settings, no_call)
        await session.open()
        await script.until(lambda: len(script.last_event_ids) >= 2, "the stream opened again")
        assert script.last_event_ids[:2] == [None, "e1"]
        await script.until(lambda: script.open_streams == 1, "the second stream is up")
        await asyncio.sleep(
            0.2
        )  # a negative check: the second stream stays up, nothing re-opens it meanwhile
        assert len(script.last_event_ids) == 2
        assert not session._tasks  # nothing waits on a stream that is up
        await session.close()
        await script.until(lambda: script.open_streams == 0, "the session's close closed its stream")
        await asyncio.sleep(0.2)  # a negative check: nothing re-opens the stream meanwhile
        assert len(script.last_event_ids) == 2  # and it was not opened again
