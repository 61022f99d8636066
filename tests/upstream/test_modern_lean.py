"""The 2026-07-28 client (proxy/upstream/modern.py) on the lean client (lean_http.py), as the native relay
sends: against a real aiohttp server, what reaches the upstream, what the caller gets for each kind of answer
and failure, and what becomes of the connection (back to the pool only after an answer read to its end)."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
import socket
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from e2e.tls_certs import issue, make_ca

from proxy.config import TlsConfig, UpstreamConfig
from proxy.upstream.base import NotDelivered, UpstreamAuthChallenge, UpstreamError
from proxy.upstream.lean_http import ENCODED, LeanClient
from proxy.upstream.lean_response import HIGH_WATER
from proxy.upstream.modern import ModernTarget, NotModern, post
from proxy.upstream.propagation import propagating
from proxy.upstream.senders import ModernSenders
from proxy.upstream.tls import client_context, tls_sessions
from proxy.wire import jsonrpc

pytestmark = pytest.mark.asyncio(loop_scope="session")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
COMPLETE = {"jsonrpc": "2.0", "id": 1, "result": {"resultType": "complete", "content": []}}


@contextlib.asynccontextmanager
async def serving(handler: Handler) -> AsyncIterator[tuple[str, list[int]]]:
    """The server's URL, and the client port of every request it got (a reused connection: the same)."""
    ports: list[int] = []

    async def counted(request: web.Request) -> web.StreamResponse:
        peer = request.transport.get_extra_info("peername") if request.transport else None
        ports.append(peer[1] if peer else 0)
        return await handler(request)

    app = web.Application()
    app.router.add_post("/mcp", counted)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        yield str(server.make_url("/mcp")), ports
    finally:
        await server.close()


@contextlib.asynccontextmanager
async def lean_client() -> AsyncIterator[LeanClient]:
    lean = LeanClient()
    try:
        yield lean
    finally:
        await lean.close()


def call(n: int = 1) -> jsonrpc.Request:
    return jsonrpc.Request(n, "tools/call", {"name": "echo", "arguments": {}})


async def complete(request: web.Request) -> web.StreamResponse:
    return web.json_response({**COMPLETE, "id": (await request.json())["id"]})


async def test_a_json_answer_is_read_and_its_connection_reused() -> None:
    async with serving(complete) as (url, ports), lean_client() as lean:
        target = ModernTarget(url, {}, timeout=10)
        first = await post(lean, target, call(1))
        second = await post(lean, target, call(2))
        assert isinstance(first, jsonrpc.Result) and isinstance(second, jsonrpc.Result)
        assert second.id == 2 and lean.idle == 1
    assert len(ports) == 2 and ports[0] == ports[1]  # one connection for both


async def test_what_a_request_carries_upstream_on_the_lean_client() -> None:
    """As on aiohttp (test_modern.py), and `Accept-Encoding: identity` over any of the same name: the
    proxy inflates nothing, so it asks for nothing compressed."""
    seen: list[dict[str, list[str]]] = []

    async def handler(request: web.Request) -> web.StreamResponse:
        seen.append({k.lower(): request.headers.getall(k) for k in request.headers})
        return web.json_response(COMPLETE)

    static = {"Authorization": "Bearer t", "Accept-Encoding": "gzip", "mcp-method": "wrong"}
    async with serving(handler) as (url, _), lean_client() as lean:
        target = ModernTarget(url, static, timeout=10)
        extra = {"Mcp-Param-Region": "eu", "Authorization": "Bearer forwarded", "ACCEPT": "text/plain"}
        with propagating({"x-request-id": "rid-1"}):
            await post(lean, target, call(), extra_headers=extra)
    (got,) = seen
    assert got["authorization"] == ["Bearer forwarded"] and got["mcp-param-region"] == ["eu"]
    assert got["x-request-id"] == ["rid-1"] and got["accept-encoding"] == ["identity"]
    assert got["accept"] == ["application/json, text/event-stream"]
    assert got["content-type"] == ["application/json"]
    assert got["mcp-protocol-version"] == ["2026-07-28"] and got["mcp-method"] == ["tools/call"]
    assert got["mcp-name"] == ["echo"]


async def test_a_long_event_stream_is_streamed_with_flow_control_and_its_connection_reused() -> None:
    """Notes many times the lean client's read-ahead (HIGH_WATER) to a consumer slower than the server: each
    reaches `on_note` in order, the answer ends the stream, and the connection goes back to the pool."""
    notes = 64
    pad = "p" * (HIGH_WATER // 4)

    async def handler(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for n in range(notes):
            note = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": n, "p": pad}}
            await resp.write(f"data: {json.dumps(note)}\n\n".encode())
        await resp.write(f"data: {json.dumps(COMPLETE)}\n\n".encode())
        await resp.write_eof()
        return resp

    got: list[int] = []

    async def on_note(note: jsonrpc.Notification) -> None:
        got.append(note.params["progress"])
        if len(got) == 1:
            await asyncio.sleep(
                0.2
            )  # the scenario: a slow consumer; the server runs ahead, the client stops reading, then reads on

    async with serving(handler) as (url, ports), lean_client() as lean:
        target = ModernTarget(url, {}, timeout=30)
        answer = await post(lean, target, call(), on_note=on_note)
        assert isinstance(answer, jsonrpc.Result) and answer.result["resultType"] == "complete"
        assert got == list(range(notes))
        assert lean.idle == 1
        await post(lean, target, call())
    assert len(ports) == 2 and ports[0] == ports[1]


async def test_a_listen_stream_cancelled_by_its_client_closes_its_connection() -> None:
    """A `subscriptions/listen` answer is held open (no deadline) until the client leaves: its connection is
    then closed, not pooled (what is left of the stream must never be read as another request's answer),
    and the server sees it go; the next request gets a new connection."""
    gone = asyncio.Event()

    async def handler(request: web.Request) -> web.StreamResponse:
        if (await request.json())["method"] != "subscriptions/listen":
            return await complete(request)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        note = {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
        try:
            await resp.write(f"data: {json.dumps(note)}\n\n".encode())
            for _ in range(600):  # a keep-alive comment every 50 ms: the write fails once the client left
                await asyncio.sleep(0.05)  # the scripted server: keep-alives every 50 ms
                await resp.write(b": ping\n\n")
        except (ConnectionError, asyncio.CancelledError):
            gone.set()
            raise
        return resp

    heard = asyncio.Event()

    async def on_note(note: jsonrpc.Notification) -> None:
        heard.set()

    async with serving(handler) as (url, ports), lean_client() as lean:
        listen = jsonrpc.Request(7, "subscriptions/listen", {})
        held = asyncio.create_task(post(lean, ModernTarget(url, {}, timeout=None), listen, on_note=on_note))
        await asyncio.wait_for(heard.wait(), 10)
        held.cancel()
        with pytest.raises(asyncio.CancelledError):
            await held
        assert lean.idle == 0
        await asyncio.wait_for(gone.wait(), 10)
        answer = await post(lean, ModernTarget(url, {}, timeout=10), call())
        assert isinstance(answer, jsonrpc.Result)
    assert len(ports) == 2 and ports[0] != ports[1]


async def test_a_compressed_answer_is_refused_and_the_next_request_works() -> None:
    """The relay used to accept gzip (aiohttp inflated it, bounded by max_message_bytes); on the lean client
    an answer with a Content-Encoding fails its request with an UpstreamError naming it, nothing of it is
    decoded (its connection closed, or pooled when its whole body had arrived and was framed), and the next
    request is answered."""

    async def handler(request: web.Request) -> web.StreamResponse:
        if (await request.json())["id"] == 1:
            body = gzip.compress(json.dumps(COMPLETE).encode())
            return web.Response(
                body=body, headers={"Content-Type": "application/json", "Content-Encoding": "gzip"}
            )
        return await complete(request)

    async with serving(handler) as (url, ports), lean_client() as lean:
        target = ModernTarget(url, {}, timeout=10)
        with pytest.raises(UpstreamError, match=f"^{ENCODED} 'gzip'.*nothing of it decoded$") as refused:
            await post(lean, target, call(1))
        assert not isinstance(refused.value, NotDelivered)  # the request was sent: it may have run
        answer = await post(lean, target, call(2))
        assert isinstance(answer, jsonrpc.Result) and answer.id == 2
    assert len(ports) == 2


async def test_a_challenge_passes_on_its_www_authenticate() -> None:
    challenge = 'Bearer resource_metadata="https://up.example/.well-known/oauth-protected-resource"'

    async def handler(request: web.Request) -> web.StreamResponse:
        return web.Response(status=401, headers={"WWW-Authenticate": challenge})

    async with serving(handler) as (url, _), lean_client() as lean:
        with pytest.raises(UpstreamAuthChallenge) as refused:
            await post(lean, ModernTarget(url, {}, timeout=10), call())
    assert refused.value.status == 401 and refused.value.www_authenticate == challenge


async def test_a_connection_refused_is_not_delivered() -> None:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    async with lean_client() as lean:
        with pytest.raises(NotDelivered, match="could not connect to upstream: ConnectFailed"):
            await post(lean, ModernTarget(f"http://127.0.0.1:{port}/mcp", {}, timeout=10), call())


async def test_a_legacy_answer_is_not_modern_and_an_answer_past_the_deadline_times_out() -> None:
    release = asyncio.Event()

    async def handler(request: web.Request) -> web.StreamResponse:
        if (await request.json())["id"] == 1:
            return web.json_response({"jsonrpc": "2.0", "id": "server-error", "error": {"code": -32600,
                                      "message": "Bad Request: Missing session ID"}}, status=400)  # fmt: skip
        await asyncio.wait_for(release.wait(), 10)
        return await complete(request)

    async with serving(handler) as (url, _), lean_client() as lean:
        with pytest.raises(NotModern, match="HTTP 400"):
            await post(lean, ModernTarget(url, {}, timeout=10), call(1))
        with pytest.raises(TimeoutError):
            await post(lean, ModernTarget(url, {}, timeout=0.2), call(2))
        release.set()
        assert lean.idle == 0  # the timed-out request's connection is closed, not pooled


async def test_senders_post_on_the_lean_client_with_each_upstreams_tls(tmp_path: Path) -> None:
    """`ModernSenders` with the app's lean client: an upstream with a private CA (upstreams[].tls.ca_file)
    is reached with its own SSL context (tls.context_of its aiohttp client), on one reused connection; the
    same server as an upstream without it fails certificate verification before anything is sent."""
    ca = make_ca(tmp_path, "ca")
    server_cert = issue(tmp_path, "server", ca, server=True)
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(server_cert.cert, server_cert.key)
    app = web.Application()
    ports: list[int] = []

    async def handler(request: web.Request) -> web.StreamResponse:
        peer = request.transport.get_extra_info("peername") if request.transport else None
        ports.append(peer[1] if peer else 0)
        return await complete(request)

    app.router.add_post("/mcp", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=server_ctx)
    await site.start()
    port = runner.addresses[0][1]
    url = f"https://127.0.0.1:{port}/mcp"
    upstreams = {
        "private": UpstreamConfig(name="private", url=url, era="modern"),
        "plain": UpstreamConfig(name="plain", url=url, era="modern"),
    }
    ctx = client_context(TlsConfig(ca_file=ca[0].cert), "upstreams[0]")
    shared = aiohttp.ClientSession()
    clients = {"plain": shared, **tls_sessions({"private": ctx}, shared.timeout)}
    try:
        async with lean_client() as lean:
            senders = ModernSenders(upstreams, clients, lean=lean)
            for n in (1, 2):
                answer = await senders.sender("private", timeout=10)(call(n))
                assert isinstance(answer, jsonrpc.Result) and answer.id == n
            with pytest.raises(NotDelivered, match="CERTIFICATE_VERIFY_FAILED"):
                await senders.sender("plain", timeout=10)(call(3))
            await senders.close()
    finally:
        await asyncio.gather(*(c.close() for c in clients.values()))
        await runner.cleanup()
    assert len(ports) == 2 and ports[0] == ports[1]
