"""An upstream's `Set-Cookie` is never sent back: the proxy's HTTP clients to upstreams are shared by every
user's sessions and calls, so a cookie jar there would carry what an upstream gave in answer to one user's
request onto another user's requests (a cross-user leak). The attack, for real: a scripted upstream answers
every request with `Set-Cookie: stolen=<Alice's secret>` and records the `Cookie` header of each request it
gets; Alice calls through the proxy, then Mallory, and the upstream never sees a `Cookie` header.

The upstream is addressed as `localhost`, not 127.0.0.1: aiohttp's default jar refuses cookies from an IP
address, so an IP would hide the leak this test is there to catch. Both eras: a 2026-07-28 upstream (the
native relay) and a legacy Streamable HTTP one (a pooled session, whose `initialize` sets the cookie too).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from e2e.harness import RawClient, running_proxy
from proxy.config import UpstreamConfig

pytestmark = pytest.mark.asyncio(loop_scope="session")

SECRET = "alice-secret-4f1c"
SESSION = "cookie-session-1"
Era = Literal["modern", "legacy"]


@dataclass
class CookieSetter:
    """Sets a cookie on every answer; `cookies` holds each request's Cookie header (None: none sent)."""

    era: Era
    url: str = ""
    cookies: list[str | None] = field(default_factory=list)
    methods: list[str] = field(default_factory=list)

    @web.middleware
    async def record(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        self.cookies.append(request.headers.get("Cookie"))
        resp = await handler(request)
        resp.set_cookie("stolen", SECRET, path="/")
        return resp

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if request.method != "POST":
            return web.Response(status=405)  # no standalone GET stream (legacy) and no DELETE needed
        msg = json.loads(await request.read())
        rid, method = msg.get("id"), msg.get("method", "")
        self.methods.append(method)
        if rid is None or "method" not in msg:
            return web.Response(status=202)
        if self.era == "modern":
            if method == "server/discover":
                caps: dict[str, Any] = {"tools": {}}
                return _result(rid, {"supportedVersions": ["2026-07-28"], "capabilities": caps})
            return _result(rid, {"resultType": "complete", "content": [{"type": "text", "text": "hi"}]})
        if method == "initialize":
            result = {
                "protocolVersion": msg["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "cookie-setter", "version": "1"},
            }
            return _result(rid, result, {"Mcp-Session-Id": SESSION})
        if request.headers.get("Mcp-Session-Id") != SESSION:
            return web.Response(status=400, text="Bad Request: Missing session ID")  # e.g. server/discover
        return _result(rid, {"content": [{"type": "text", "text": "hi"}]})


def _result(rid: Any, result: dict[str, Any], headers: dict[str, str] | None = None) -> web.Response:
    return web.json_response({"jsonrpc": "2.0", "id": rid, "result": result}, headers=headers)


@contextlib.asynccontextmanager
async def cookie_setter(era: Era) -> AsyncIterator[CookieSetter]:
    server = CookieSetter(era)
    app = web.Application(middlewares=[server.record])
    app.router.add_route("*", "/mcp", server.handle)
    test_server = TestServer(app, host="127.0.0.1")
    await test_server.start_server()
    server.url = f"http://localhost:{test_server.port}/mcp"  # a host name: see the module docstring
    try:
        yield server
    finally:
        await test_server.close()


@pytest.mark.parametrize("era", ["modern", "legacy"])
async def test_a_cookie_set_for_one_user_never_reaches_the_upstream_again(era: Era) -> None:
    async with cookie_setter(era) as upstream:
        # forward_headers: [] so nothing of the client's own goes upstream: a Cookie there is the jar's
        config = UpstreamConfig(name="default", url=upstream.url, forward_headers=())
        async with running_proxy(config) as proxy, aiohttp.ClientSession() as http:
            alice = RawClient(proxy.url, http, authorization="Bearer alice")
            mallory = RawClient(proxy.url, http, authorization="Bearer mallory")
            for client in (alice, alice, mallory, mallory):
                reply = await client.call("echo")
                assert reply.result["content"][0]["text"] == "hi"
                assert "stolen" not in reply.headers.get("Set-Cookie", "")  # nor is it passed to clients
    assert upstream.methods.count("tools/call") == 4
    if era == "legacy":
        assert "initialize" in upstream.methods
    assert len(upstream.cookies) >= 5  # at least the era probe or initialize, and the four calls
    assert upstream.cookies == [None] * len(upstream.cookies)
