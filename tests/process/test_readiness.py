"""`/readyz` reachability as the real process judges it (proxy/process/readiness.py, upstream/reachability.py;
issue 20, item 7): a stdio command that starts and answers `initialize` is reachable, one on PATH that
exits at once is not; a URL with nothing listening is not. Requests to the ones down fail cleanly, and every
line the process writes stays JSON."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import aiohttp
import peers
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from e2e.recording import recording_relay

from proxy.config import Config, UpstreamConfig
from proxy.handle import KeyRing
from proxy.process.app import create_app
from proxy.process.appstate import STATE
from proxy.upstream.reachability import RECHECK_S, InitializeChecks

PROXY = [sys.executable, "-m", "proxy"]
FAKE = Path(__file__).parents[1] / "upstream" / "fakes" / "fake_stdio_server.py"
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}
LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": META}}
HEADERS = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"}


@pytest.mark.asyncio(loop_scope="session")
async def test_readyz_says_which_upstreams_answer(tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    upstreams = [
        {"name": "answers", "command": sys.executable, "args": [str(FAKE)]},
        {"name": "exits", "command": "false"},  # on PATH, dies at once
        {"name": "down", "url": f"http://127.0.0.1:{peers.closed_port()}/mcp"},
        {"name": "sse-down", "url": f"http://127.0.0.1:{peers.closed_port()}/sse", "transport": "sse"},
    ]
    cfg.write_text(json.dumps({"logging": {"format": "json"}, "upstreams": upstreams}))
    argv = [*PROXY, "serve", "--config", str(cfg)]
    async with (
        peers.run_peer("mrtr-proxy", lambda p: [*argv, "--listen", f"127.0.0.1:{p}"]) as proxy,
        aiohttp.ClientSession() as http,
    ):
        async with http.get(f"http://127.0.0.1:{proxy.port}/readyz") as r:
            status, body = r.status, await r.json()
        for name in (
            "exits",
            "down",
            "sse-down",
        ):  # the requests fail cleanly, and leave no unretrieved future behind
            async with http.post(
                f"http://127.0.0.1:{proxy.port}/servers/{name}/mcp", json=LIST, headers=HEADERS
            ) as r:
                assert (await r.json())["error"]["code"] == -31001
        text = proxy.log_text(tail=None)
    assert status == 200 and body["status"] == "ready"
    down = {"exits": "unreachable", "down": "unreachable", "sse-down": "unreachable"}
    assert body["upstreams"] == {"answers": "reachable", **down}
    assert all(isinstance(json.loads(line), dict) for line in text.splitlines())
    assert "never retrieved" not in text


async def _readyz(http: aiohttp.ClientSession, port: int) -> tuple[int, dict[str, object]]:
    async with http.get(f"http://127.0.0.1:{port}/readyz") as r:
        return r.status, await r.json()


async def _html_404_app() -> web.AppRunner:
    """An upstream whose /mcp is no MCP endpoint: Express-style HTML 404 pages to every request."""

    async def page(_: web.Request) -> web.Response:
        return web.Response(
            status=404,
            text="<!DOCTYPE html><html><body>Cannot POST</body></html>" * 20,
            content_type="text/html",
        )

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", page)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    return runner


@pytest.mark.asyncio(loop_scope="session")
async def test_an_http_sse_server_configured_as_streamable_http_is_named_and_not_ready(
    tmp_path: Path,
) -> None:
    """`serve --upstream …/sse` against a real FastMCP 1.30 HTTP+SSE server: once answered -31001 with the
    405 logged once per offered version (four times) while /readyz said ready. Now the log line says to set
    `transport: sse`, /readyz is 503 with the reason, and beside a working upstream the gateway is ready."""
    html = await _html_404_app()
    html_port = html.addresses[0][1]
    try:
        async with peers.start_fastmcp("sse") as sse_url, aiohttp.ClientSession() as http:
            argv = [*PROXY, "serve", "--upstream", sse_url, "--log-format", "json"]
            async with peers.run_peer("mrtr-proxy", lambda p: [*argv, "--listen", f"127.0.0.1:{p}"]) as proxy:
                status, body = await _readyz(http, proxy.port)
                async with http.post(f"http://127.0.0.1:{proxy.port}/mcp", json=LIST, headers=HEADERS) as r:
                    assert (await r.json())["error"]["code"] == -31001
                lines = [json.loads(line) for line in proxy.log_text(tail=None).splitlines()]
            assert status == 503 and body["status"] == "no upstream reachable"
            assert body["upstreams"] == {"default": "not initialising"}
            hint = (
                "this looks like an HTTP+SSE (2024-11-05) server: set transport: sse for upstream 'default'"
            )
            assert hint in body["upstream_problems"]["default"]  # type: ignore[index]
            (failed,) = [line for line in lines if line["event"] == "upstream.unavailable"]
            assert hint in failed["error"]
            assert failed["error"].count("HTTP 405") == 1  # one offer: a 405 refuses the URL, not the version

            cfg = tmp_path / "two.yaml"
            upstreams = [
                {"name": "wrong", "url": sse_url},  # transport defaults to streamable-http
                {"name": "right", "url": sse_url, "transport": "sse"},
                {"name": "html", "url": f"http://127.0.0.1:{html_port}/mcp"},
            ]
            cfg.write_text(json.dumps({"logging": {"format": "json"}, "upstreams": upstreams}))
            argv = [*PROXY, "serve", "--config", str(cfg)]
            async with peers.run_peer("mrtr-proxy", lambda p: [*argv, "--listen", f"127.0.0.1:{p}"]) as proxy:
                status, body = await _readyz(http, proxy.port)
                async with http.post(
                    f"http://127.0.0.1:{proxy.port}/servers/html/mcp", json=LIST, headers=HEADERS
                ) as r:
                    assert (await r.json())["error"]["code"] == -31001
                text = proxy.log_text(tail=None)
        assert status == 200 and body["status"] == "ready"  # one upstream wrong: still in rotation
        assert body["upstreams"] == {
            "wrong": "not initialising",
            "right": "reachable",
            "html": "not initialising",
        }
        problems = body["upstream_problems"]
        assert "set transport: sse for upstream 'wrong'" in problems["wrong"]  # type: ignore[index]
        assert (
            problems["html"] == "initialize failed: 2025-11-25: upstream answered HTTP 404 with an HTML page"
        )  # type: ignore[index]
        assert "<html" not in text.lower()  # the page is named, never logged
    finally:
        await html.cleanup()


@pytest.mark.asyncio(loop_scope="session")
async def test_readyz_initialises_a_url_upstream_once_then_checks_its_port_only(fastmcp_url: str) -> None:
    """Until a session of its pool has initialised, /readyz opens one itself; after that one success no
    probe opens another session upstream (a kubelet probes every few seconds), however long it runs."""
    now = [0.0]
    async with recording_relay(fastmcp_url) as relay, aiohttp.ClientSession() as http:
        app = create_app(
            Config(upstreams=(UpstreamConfig(name="default", url=relay.url),)), ring=KeyRing.ephemeral()
        )
        app[STATE].initialize_checks = InitializeChecks(clock=lambda: now[0])
        server = TestServer(app, host="127.0.0.1")
        await server.start_server()
        try:
            answers = []
            for _ in range(3):
                async with http.get(server.make_url("/readyz")) as r:
                    answers.append((r.status, (await r.json())["upstreams"]))
                now[0] += RECHECK_S + 1  # past the time a check's result is kept
        finally:
            await server.close()
    assert answers == [(200, {"default": "reachable"})] * 3
    assert len(relay.posts("initialize")) == 1
