"""The stateless 2026-07-28 client (proxy/upstream/modern.py) against a scripted server: an answer is read
whole however it is split, and never past `max_message_bytes`."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from proxy.upstream.bounded import MessageTooLarge
from proxy.upstream.modern import ModernTarget, post
from proxy.wire import jsonrpc

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
TEXT = "x" * 1_000_000
ANSWER = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": TEXT}]}})


@contextlib.asynccontextmanager
async def serving(handler: Handler) -> AsyncIterator[str]:
    app = web.Application()
    app.router.add_post("/mcp", handler)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        yield str(server.make_url("/mcp"))
    finally:
        await server.close()


async def in_pieces(request: web.Request, body: bytes, content_type: str) -> web.StreamResponse:
    resp = web.StreamResponse(headers={"Content-Type": content_type})
    await resp.prepare(request)
    with contextlib.suppress(ConnectionError):
        for start in range(0, len(body), 100_000):  # many chunks, a moment apart
            await resp.write(body[start : start + 100_000])
            await asyncio.sleep(0.01)
    return resp


async def call(url: str, limit: int = 16 * 1024 * 1024) -> jsonrpc.Response:
    async with aiohttp.ClientSession() as http:
        target = ModernTarget(url, {}, timeout=10, max_message_bytes=limit)
        return await post(http, target, jsonrpc.Request(1, "tools/call", {"name": "big"}))


async def test_a_json_answer_in_many_chunks_is_read_whole() -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        return await in_pieces(request, ANSWER.encode(), "application/json")

    async with serving(handler) as url:
        answer = await call(url)
    assert isinstance(answer, jsonrpc.Result)
    assert answer.result["content"][0]["text"] == TEXT


@pytest.mark.parametrize("content_type", ["application/json", "text/event-stream"])
async def test_an_answer_over_max_message_bytes_is_refused(content_type: str) -> None:
    body = ANSWER.encode() if content_type == "application/json" else b"data: " + ANSWER.encode() + b"\n\n"

    async def handler(request: web.Request) -> web.StreamResponse:
        return await in_pieces(request, body, content_type)

    async with serving(handler) as url:
        with pytest.raises(
            MessageTooLarge, match=r"larger than 65536 bytes \(upstreams\[\]\.max_message_bytes\)"
        ):
            await call(url, limit=64 * 1024)
