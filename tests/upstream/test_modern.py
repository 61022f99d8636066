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
from proxy.upstream.modern import ModernTarget, header_value, post
from proxy.upstream.propagation import propagating
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
            await asyncio.sleep(0.01)  # the scripted server: chunks a moment apart
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


async def test_what_a_request_carries_upstream_and_which_header_wins() -> None:
    """The target's (static) headers, the extra ones over them (forwarded credentials, the client's
    Mcp-Param-*), the propagated X-Request-Id, and the request metadata headers and Accept/Content-Type over
    any of the same name (in any case)."""
    seen: list[dict[str, list[str]]] = []

    async def handler(request: web.Request) -> web.StreamResponse:
        seen.append({k.lower(): request.headers.getall(k) for k in request.headers})
        return web.json_response({"jsonrpc": "2.0", "id": 1, "result": {"resultType": "complete"}})

    static = {"Authorization": "Bearer t", "X-Static": "1", "accept": "text/html", "mcp-method": "wrong"}
    async with serving(handler) as url, aiohttp.ClientSession() as http:
        target = ModernTarget(url, static, timeout=10)
        with propagating({"x-request-id": "rid-1"}):
            msg = jsonrpc.Request(1, "tools/call", {"name": "grüß", "arguments": {}})
            extra = {"Mcp-Param-Region": "eu", "Authorization": "Bearer forwarded", "ACCEPT": "text/plain"}
            answer = await post(http, target, msg, extra_headers=extra)
        assert isinstance(answer, jsonrpc.Result)
        await post(http, target, jsonrpc.Request(1, "tools/list", {}))  # outside a request: no id
    first, second = seen
    assert first["authorization"] == ["Bearer forwarded"] and first["x-static"] == ["1"]
    assert first["mcp-param-region"] == ["eu"] and first["x-request-id"] == ["rid-1"]
    assert first["accept"] == ["application/json, text/event-stream"]
    assert first["content-type"] == ["application/json"]
    assert first["mcp-protocol-version"] == ["2026-07-28"] and first["mcp-method"] == ["tools/call"]
    assert first["mcp-name"] == [header_value("grüß")] and first["mcp-name"][0].startswith("=?base64?")
    assert "x-request-id" not in second and "mcp-name" not in second and "mcp-param-region" not in second
    assert second["authorization"] == ["Bearer t"]
    assert second["mcp-method"] == ["tools/list"]


async def test_an_answer_keeps_the_bytes_it_came_in_json_or_on_an_event_stream() -> None:
    """What the relay passes on unchanged goes to the client as the upstream wrote it (jsonrpc Result.raw)."""
    written = b'{"jsonrpc": "2.0", "id": 1, "result": {"resultType": "complete", "content": []}}'
    note = b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}'

    async def as_json(request: web.Request) -> web.StreamResponse:
        return web.Response(body=written, content_type="application/json")

    async def as_events(request: web.Request) -> web.StreamResponse:
        return web.Response(
            body=b"data: " + note + b"\n\ndata: " + written + b"\n\n", content_type="text/event-stream"
        )

    for handler in (as_json, as_events):
        async with serving(handler) as url:
            answer = await call(url)
        assert isinstance(answer, jsonrpc.Result) and answer.raw == written
        assert jsonrpc.dumps(answer) == written
