"""Answers no room words itself (proxy/front/fallback.py), and the legacy client that lost its session id
(issue 20, item 7): JSON bodies for unknown routes and methods, `Retry-After` on every 429 and 503."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import aiohttp
import peers
import pytest
import pytest_asyncio
from aiohttp import web
from aiohttp.test_utils import TestServer
from e2e.harness import RawClient, RunningProxy, running_proxy
from structlog.testing import capture_logs

from proxy.config import FrontConfig
from proxy.front.endpoint import NO_SESSION
from proxy.front.fallback import json_answers, json_answers_with

pytestmark = pytest.mark.asyncio(loop_scope="session")


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def proxy() -> AsyncIterator[RunningProxy]:
    front = FrontConfig(rate_limit_per_s=0.01, rate_burst=1)  # the second request of a principal: 429
    async with running_proxy(f"http://127.0.0.1:{peers.closed_port()}/mcp", front=front) as running:
        yield running


@pytest_asyncio.fixture(loop_scope="session")
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


def base(proxy: RunningProxy) -> str:
    return proxy.url.removesuffix("/mcp")


@pytest.mark.parametrize("path", ["/", "/nope", "/servers/nobody/mcp", "/_mrtr/peer/nothing", "/mcp/x"])
async def test_unknown_routes_answer_json(
    proxy: RunningProxy, http: aiohttp.ClientSession, path: str
) -> None:
    async with http.get(base(proxy) + path, headers={"Authorization": f"Bearer {path}"}) as r:
        assert r.status == 404
        assert r.content_type == "application/json"
        body = await r.json()
    assert body["jsonrpc"] == "2.0" and body["id"] is None
    assert body["error"]["code"] == -32600
    expected = "no upstream named 'nobody'" if "nobody" in path else "Not found (MCP is served at /mcp and"
    assert body["error"]["message"].startswith(expected)


async def test_a_method_the_route_does_not_take_answers_json(
    proxy: RunningProxy, http: aiohttp.ClientSession
) -> None:
    async with http.put(proxy.url, headers={"Authorization": "Bearer put"}) as r:
        assert (r.status, r.content_type, r.headers["Allow"]) == (405, "application/json", "POST")
        assert "X-Request-Id" in r.headers
        assert (await r.json())["error"]["message"].startswith("2026-07-28 clients use POST only")
    async with http.delete(base(proxy) + "/healthz") as r:
        assert (r.status, r.content_type) == (405, "application/json")


async def test_a_legacy_client_without_a_session_id_is_told_to_initialize(
    proxy: RunningProxy, http: aiohttp.ClientSession
) -> None:
    """A legacy client's tools/list without Mcp-Session-Id: not a lecture about modern headers."""
    for headers in ({}, {"MCP-Protocol-Version": "2025-06-18"}):
        body = {"jsonrpc": "2.0", "id": 7, "method": "tools/list"}
        auth = {"Authorization": f"Bearer legacy-{len(headers)}"}
        async with http.post(proxy.url, data=json.dumps(body), headers={**headers, **auth}) as r:
            assert r.status == 400
            answer = await r.json()
        assert answer == {"jsonrpc": "2.0", "id": 7, "error": {"code": -32600, "message": NO_SESSION}}
        assert "MCP-Protocol-Version" not in answer["error"]["message"]
        assert NO_SESSION.startswith("Missing Mcp-Session-Id: a legacy client starts with initialize")


async def test_a_modern_request_missing_its_header_still_hears_about_it(
    proxy: RunningProxy, http: aiohttp.ClientSession
) -> None:
    client = RawClient(proxy.url, http, authorization="Bearer modern")
    body = client.body("tools/list")
    headers = {k: v for k, v in client.headers(body).items() if k != "MCP-Protocol-Version"}
    reply = await client.send(body, headers)
    assert reply.status == 400
    assert reply.error["message"] == "Header mismatch: the MCP-Protocol-Version header is required"


async def test_429_and_503_carry_retry_after(proxy: RunningProxy, http: aiohttp.ClientSession) -> None:
    client = RawClient(proxy.url, http, authorization="Bearer hasty")
    await client.request("tools/list")  # the burst of one
    limited = await client.request("tools/list")
    assert limited.status == 429 and limited.error["code"] == -31003
    assert int(limited.headers["Retry-After"]) >= 1
    async with http.get(base(proxy) + "/readyz") as r:  # nothing listens at the upstream's port
        assert r.status == 503
        assert r.headers["Retry-After"] == "1"
        assert (await r.json())["status"] == "no upstream reachable"


@pytest.mark.unhandled_expected
async def test_a_bug_is_still_a_json_rpc_answer(http: aiohttp.ClientSession) -> None:
    async def broken(_: web.Request) -> web.Response:
        raise KeyError("a bug")

    app = web.Application(middlewares=[json_answers])
    app.router.add_get("/broken", broken)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        with capture_logs() as logs:
            async with http.get(server.make_url("/broken")) as r:
                assert (r.status, r.content_type) == (500, "application/json")
                assert (await r.json())["error"] == {"code": -32603, "message": "Internal error"}
    finally:
        await server.close()
    assert [e["event"] for e in logs] == ["request.unhandled"]


async def test_gates_answer_inside_it_before_the_handler(http: aiohttp.ClientSession) -> None:
    """The app's peer-port and preflight checks are gates of `json_answers_with`, not middlewares: in order,
    an answer of a gate's own is the answer (the handler never runs), its HTTPException becomes a JSON-RPC
    error, and a 503 of a gate's own still gets `Retry-After`; every gate passing, the handler answers."""
    seen: list[str] = []

    def refuse(request: web.Request) -> None:
        if request.path == "/refused":
            raise web.HTTPNotFound()

    def busy(request: web.Request) -> web.Response | None:
        return web.Response(status=503, text="busy") if request.path == "/busy" else None

    async def handler(request: web.Request) -> web.Response:
        seen.append(request.path)
        return web.Response(text="handled")

    app = web.Application(middlewares=[json_answers_with(refuse, busy)])
    for path in ("/refused", "/busy", "/ok"):
        app.router.add_get(path, handler)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        async with http.get(server.make_url("/refused")) as r:
            assert (r.status, r.content_type) == (404, "application/json")
            assert (await r.json())["error"]["code"] == -32600
        async with http.get(server.make_url("/busy")) as r:
            assert (r.status, r.headers["Retry-After"], await r.text()) == (503, "1", "busy")
        async with http.get(server.make_url("/ok")) as r:
            assert (r.status, await r.text()) == (200, "handled")
    finally:
        await server.close()
    assert seen == ["/ok"]


async def test_its_watch_is_told_of_each_request_however_it_ends(http: aiohttp.ClientSession) -> None:
    """The listener's guard is told of each request by the front door itself (its `watch`), not by a
    middleware of its own: when handling begins, and when it ends, answered or refused."""
    told: list[tuple[str, str]] = []

    class Watch:
        def began(self, request: web.BaseRequest) -> object:
            told.append(("began", request.path))
            return request.path

        def ended(self, token: object) -> None:
            told.append(("ended", str(token)))

    async def handler(request: web.Request) -> web.Response:
        if request.path == "/refused":
            raise web.HTTPForbidden()
        return web.Response(text="handled")

    door = json_answers_with()
    door.watch = Watch()
    app = web.Application(middlewares=[door])
    for path in ("/ok", "/refused"):
        app.router.add_get(path, handler)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        async with http.get(server.make_url("/ok")) as r:
            assert (r.status, await r.text()) == (200, "handled")
        async with http.get(server.make_url("/refused")) as r:
            assert (r.status, r.content_type) == (403, "application/json")
    finally:
        await server.close()
    assert told == [("began", "/ok"), ("ended", "/ok"), ("began", "/refused"), ("ended", "/refused")]
