"""Writing one answer (proxy/front/reply.py): keep-alive comments while a call runs, from one ticker for
every request in flight rather than a timer each, and none for a request that ends before its first; and
Replier.kept_alive leaves nothing behind for the cycle collector: a request's replier (and the request it
holds) is freed by reference counting as soon as its handler is done."""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import AsyncIterator

import aiohttp
import pytest
import pytest_asyncio
from aiohttp import web
from aiohttp.test_utils import TestServer, make_mocked_request
from waiting import eventually

from proxy.front import reply
from proxy.front.reply import Replier
from proxy.wire import jsonrpc

pytestmark = pytest.mark.asyncio(loop_scope="session")
INTERVAL = 0.05


async def _answer(request: web.Request) -> web.StreamResponse:
    replier = Replier(request)
    release: asyncio.Event = request.app["release"]

    async def work() -> jsonrpc.Response:
        if request.path == "/slow":
            await asyncio.wait_for(release.wait(), 10)
        return jsonrpc.Result(1, {"ok": True})

    return await replier.finish(await replier.kept_alive(work(), INTERVAL))


@pytest_asyncio.fixture(loop_scope="session")
async def server() -> AsyncIterator[TestServer]:
    app = web.Application()
    app["release"] = asyncio.Event()
    app.router.add_post("/slow", _answer)
    app.router.add_post("/quick", _answer)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        yield server
    finally:
        await server.close()


async def test_a_long_call_gets_keep_alive_comments_and_then_its_answer(server: TestServer) -> None:
    headers = {"Accept": "application/json, text/event-stream"}
    async with aiohttp.ClientSession() as http, http.post(server.make_url("/slow"), headers=headers) as r:
        assert r.headers["Content-Type"].startswith("text/event-stream")
        first = await asyncio.wait_for(r.content.readline(), 10)  # the stream began with a comment
        assert first.startswith(b":")
        server.app["release"].set()
        rest = await asyncio.wait_for(r.content.read(), 10)
    assert b'"ok":true' in rest


async def test_a_quick_call_is_plain_json_and_leaves_no_ticker_running(server: TestServer) -> None:
    json_only = {"Accept": "application/json"}
    async with aiohttp.ClientSession() as http, http.post(server.make_url("/quick"), headers=json_only) as r:
        assert (r.status, r.content_type) == (200, "application/json")
        assert (await r.json())["result"] == {"ok": True}
    ticker = reply._ticker(INTERVAL)
    assert not ticker.due  # nothing registered once the answers are written
    # The ticker's timer ends at its next tick with nothing due.
    await eventually(lambda: ticker._timer is None, "the ticker's timer to end", 200 * INTERVAL / 4)


async def test_a_kept_alive_replier_is_freed_without_the_collector() -> None:
    replier = Replier(make_mocked_request("POST", "/mcp", headers={"Accept": "application/json"}))
    freed = weakref.ref(replier)
    gc.disable()
    try:
        assert await replier.kept_alive(asyncio.sleep(0, "answer"), 60.0) == "answer"
        del replier
        assert freed() is None  # before: the re-arming closure referred to itself, and held the replier
    finally:
        gc.enable()


async def test_keep_alive_ticks_are_written_then_stop_with_the_work() -> None:
    replier = Replier(make_mocked_request("POST", "/mcp", headers={"Accept": "application/json"}))
    ticks = 0

    async def keepalive() -> None:
        nonlocal ticks
        ticks += 1

    replier.keepalive = keepalive  # type: ignore[method-assign]
    assert await replier.kept_alive(asyncio.sleep(0.05, "answer"), 0.01) == "answer"
    seen = ticks
    await asyncio.sleep(0.03)  # a negative check: no further tick comes in this time
    assert seen >= 1 and ticks == seen


@pytest.mark.parametrize(
    ("answer", "status"),
    [
        (jsonrpc.error(1, -32601, "Method not found: tools/frobnicate"), 404),
        (jsonrpc.error(1, -32602, "Invalid requestState"), 200),
        (jsonrpc.error(1, -31001, "Upstream 'up' unavailable"), 200),
        (jsonrpc.Result(1, {}), 200),
    ],
)
async def test_an_unknown_method_is_the_one_answer_carried_by_404(
    answer: jsonrpc.Response, status: int
) -> None:
    assert reply.status_of(answer) == status
