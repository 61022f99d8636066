"""The listener guard on a real aiohttp server over real sockets: each deadline cuts, the cap refuses."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from waiting import eventually

from proxy.front.fallback import json_answers_with
from proxy.process.listener import GuardedSite, ListenerGuard, ListenerLimits

pytestmark = pytest.mark.asyncio(loop_scope="session")

LIMITS = ListenerLimits(header_timeout_s=0.3, body_timeout_s=0.3, idle_timeout_s=0.3, max_connections=3)
BOUND = 10.0  # every wait below is bounded by this


async def _echo(request: web.Request) -> web.Response:
    return web.Response(text=str(len(await request.read())))


@contextlib.asynccontextmanager
async def guarded(limits: ListenerLimits = LIMITS) -> AsyncIterator[tuple[ListenerGuard, int]]:
    guard = ListenerGuard(limits, tick=0.05)
    door = json_answers_with()  # the proxy's one middleware, which tells the guard of each request
    door.watch = guard
    app = web.Application(middlewares=[door])
    app.router.add_route("*", "/", _echo)
    runner = web.AppRunner(app, keepalive_timeout=3600)
    await runner.setup()
    site = GuardedSite(runner, "127.0.0.1", 0, guard)
    await site.start()
    try:
        yield guard, site.port
    finally:
        await runner.cleanup()
        await guard.close()


async def _closed_by_server(reader: asyncio.StreamReader) -> bytes:
    """Everything the server sent until it closed the connection (bounded)."""
    data = b""
    async with asyncio.timeout(BOUND):
        try:
            while chunk := await reader.read(65536):
                data += chunk
        except ConnectionResetError:
            pass
    return data


async def test_a_request_head_that_never_ends_is_cut() -> None:
    async with guarded() as (guard, port):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n")  # …and the rest never comes
        assert await _closed_by_server(reader) == b""
        writer.close()
        assert guard.stats.cut["headers"] == 1


async def test_a_body_trickled_past_its_deadline_is_cut() -> None:
    async with guarded() as (guard, port):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nabc")
        assert await _closed_by_server(reader) == b""
        writer.close()
        assert guard.stats.cut["body"] == 1


async def test_an_idle_keepalive_connection_is_closed_and_a_quick_request_is_served() -> None:
    async with guarded() as (guard, port):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc")
        data = await _closed_by_server(reader)  # answered, then closed once idle
        assert data.startswith(b"HTTP/1.1 200 OK") and data.endswith(b"\r\n\r\n3")
        writer.close()
        assert guard.stats.cut == {"headers": 0, "body": 0, "idle": 1}


async def test_one_connection_over_the_cap_gets_503_json_rpc_and_the_others_still_work() -> None:
    async with guarded(ListenerLimits(max_connections=3)) as (guard, port):
        held = [await asyncio.open_connection("127.0.0.1", port) for _ in range(3)]
        await eventually(lambda: guard.stats.open == 3, "the server to accept three", BOUND)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        data = await _closed_by_server(reader)
        writer.close()
        head, _, body = data.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 503 ")
        assert b"Retry-After: 1" in head
        error = json.loads(body)["error"]
        assert error["code"] == -31003
        assert error["message"] == "Too many connections: 3 open (front.max_connections)"
        assert guard.stats.refused == 1
        r, w = held[0]  # a held connection still gets its request served
        w.write(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi")
        assert (await _closed_by_server(r)).endswith(b"\r\n\r\n2")
        for _, w in held:
            w.close()
