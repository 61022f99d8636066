"""finish_body (proxy/upstream/keepalive.py) against an in-process aiohttp server: a reply read to its end
leaves its connection to be reused; one that never ends is closed after the bound, costing that connection."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from types import SimpleNamespace

import aiohttp
import pytest_asyncio
from aiohttp import web
from aiohttp.test_utils import TestServer

from proxy.upstream.keepalive import finish_body, finish_later


async def _sse_then_end(request: web.Request) -> web.StreamResponse:
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    await resp.write(b'event: message\ndata: {"jsonrpc":"2.0","id":1,"result":{}}\n\n')
    await asyncio.sleep(0.05)  # the closing chunk comes a moment after the response
    await resp.write_eof()
    return resp


async def _never_ends(request: web.Request) -> web.StreamResponse:
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    await resp.write(b'data: {"jsonrpc":"2.0","id":1,"result":{}}\n\n')
    for _ in range(600):
        await asyncio.sleep(0.05)  # the scripted server: keep-alives every 50 ms
        await resp.write(b": still here\n\n")
    return resp


async def _accepted(_: web.Request) -> web.Response:
    return web.Response(status=202, text="Accepted")  # how HTTP+SSE servers answer a POST


@pytest_asyncio.fixture
async def server() -> AsyncIterator[TestServer]:
    app = web.Application()
    app.router.add_post("/ends", _sse_then_end)
    app.router.add_post("/never", _never_ends)
    app.router.add_post("/accepted", _accepted)
    srv = TestServer(app, host="127.0.0.1")
    await srv.start_server()
    yield srv
    await srv.close()


def _counting_session() -> tuple[aiohttp.ClientSession, list[object]]:
    created: list[object] = []

    async def on_create(_: object, __: SimpleNamespace, params: object) -> None:
        created.append(params)

    trace = aiohttp.TraceConfig()
    trace.on_connection_create_end.append(on_create)
    return aiohttp.ClientSession(trace_configs=[trace]), created


async def test_a_reply_read_to_its_end_leaves_the_connection_for_the_next(server: TestServer) -> None:
    http, created = _counting_session()
    async with http:
        for path in ("/ends", "/accepted", "/ends", "/accepted", "/ends"):
            async with http.post(server.make_url(path), data=b"{}") as resp:
                await resp.content.readline()  # the response's first line, as a reader stopping there
                await finish_body(resp)
    assert len(created) == 1


async def test_without_finishing_every_reply_costs_a_connection(server: TestServer) -> None:
    http, created = _counting_session()
    async with http:
        for _ in range(3):
            async with http.post(server.make_url("/ends"), data=b"{}") as resp:
                await resp.content.readline()
    assert len(created) == 3  # what the proxy did before finish_body


async def test_a_reply_that_never_ends_is_closed_after_the_bound(server: TestServer) -> None:
    http, created = _counting_session()
    async with http:
        async with http.post(server.make_url("/never"), data=b"{}") as resp:
            await resp.content.readline()
            async with asyncio.timeout(10):
                await finish_body(resp, limit=0.2)
            assert resp.closed
        async with http.post(server.make_url("/ends"), data=b"{}") as resp:
            await finish_body(resp)
    assert len(created) == 2  # the one left open was dropped, not reused


async def _late_end(request: web.Request) -> web.StreamResponse:
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    await resp.write(b'data: {"jsonrpc":"2.0","id":1,"result":{}}\n\n')
    await asyncio.sleep(0.4)  # a loaded server's closing chunk, later than FINISH_WITHIN
    await resp.write_eof()
    return resp


async def test_a_late_closing_chunk_is_awaited_in_the_background_and_keeps_the_connection() -> None:
    app = web.Application()
    app.router.add_post("/late", _late_end)
    srv = TestServer(app, host="127.0.0.1")
    await srv.start_server()
    http, created = _counting_session()
    try:
        async with http:
            for _ in range(2):
                resp = await http.post(srv.make_url("/late"), data=b"{}")
                await resp.content.readline()
                assert not await finish_body(resp, limit=0.1, close=False)  # not ended yet, not closed
                async with asyncio.timeout(10):
                    await finish_later(resp)
                assert resp.content.at_eof()
    finally:
        await srv.close()
    assert len(created) == 1  # the connection went back to the pool once the body ended
